//! Support code for Warmpath's end-to-end tests: spawn the real `replica` and `gateway`
//! binaries on loopback, a tiny blocking HTTP client, and a fault-injecting mock replica.
//!
//! The binaries are looked up next to the test executable's target dir
//! (`target/<profile>/replica`); build them first with `cargo build -p replica -p gateway`.

pub mod browser;
pub mod chaos;
pub mod epp;
pub mod fixtures;
pub mod fleet;
pub mod http;
pub mod k8s_api;
pub mod k8s_check;
pub mod llamacpp;
pub mod mock;
pub mod netns;
pub mod openai_upstream;
pub mod procs;
pub mod redis;
pub mod redis_tls;
pub mod stats;
pub mod vllm_mock;

pub use http::{HttpResponse, Sse};
pub use procs::{GatewayProc, LoggedReplica, ReplicaProc};

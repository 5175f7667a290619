//! The replica set as shared state: each replica's address, what it serves, its load,
//! health and in-flight requests. The control plane ([`crate::control`]) registers replicas
//! and keeps their load and health current; the data plane reads them to route and holds
//! in-flight slots on them.
//!
//! # Layout
//! - [`addr`]: where a replica listens (`http://host:port`).
//! - [`replica`]: one replica's state and the snapshot a policy sees.
//! - [`registry`]: the set, the tokenizer per checkpoint, in-flight slots.
//! - [`health`]: passive ejection and half-open re-admission.

pub mod addr;
pub mod health;
pub mod pending;
pub mod registry;
pub mod replica;

pub use addr::ReplicaAddr;
pub use health::{HealthState, HealthView};
pub use registry::{Registry, Slot};
pub use replica::{InsertError, Replica, UpstreamMeta};

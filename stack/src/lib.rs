//! # warmpath
//!
//! `warmpath up`: the whole Warmpath stack in one command. It starts N `replica serve`
//! processes and one `gateway` on 127.0.0.1 (the binaries next to its own executable),
//! writes the gateway a config with one development tenant, waits until every replica is
//! registered and healthy, prints the endpoint, a curl example, the dashboard URL and the
//! API key, and stops everything it started on Ctrl-C, SIGTERM or SIGHUP.
//!
//! # Layout
//! - [`up`]: the command ([`up::UpArgs`], [`up::run`]).
//! - [`config`]: the generated gateway config and API keys.
//! - [`procs`]: child processes (own process group, log files, SIGINT then SIGKILL).
//! - [`probe`]: a minimal loopback HTTP client for readiness checks.
//! - [`error`]: the crate's error type, [`StackError`].

pub mod config;
pub mod error;
pub mod probe;
pub mod procs;
pub mod up;

pub use error::StackError;

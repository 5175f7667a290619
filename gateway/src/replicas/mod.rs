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
//! - [`adapters`]: the LoRA adapters a replica has loaded, as reported and as sent.

pub(crate) mod adapters;
pub(crate) mod addr;
pub(crate) mod health;
pub(crate) mod order;
pub(crate) mod pending;
pub(crate) mod registry;
pub(crate) mod replica;

pub(crate) use addr::ReplicaAddr;
pub(crate) use registry::{Registry, Slot};
pub(crate) use replica::{InsertError, Replica, UpstreamMeta};

//! # warmpath-protocol
//!
//! Wire types that both the gateway and the replica speak, defined once. The two binaries
//! never depend on each other; they depend on this crate and on `router-policy`.
//!
//! # Layout
//! - [`replica_api`]: endpoint paths, headers, replica info and load documents.

pub mod replica_api;

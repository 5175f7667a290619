//! # warmpath-protocol
//!
//! Wire types that both the gateway and the replica speak, defined once. The two binaries
//! never depend on each other; they depend on this crate and on `router-policy`.
//!
//! # Layout
//! - [`openai`]: OpenAI-compatible request, response and error shapes.
//! - [`replica_api`]: endpoint paths, headers, replica info and load documents.
//! - [`text`]: the shared tokenizer spec, chat template rendering and stream decoding.

pub mod openai;
pub mod replica_api;
pub mod text;

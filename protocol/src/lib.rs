//! # warmpath-protocol
//!
//! Wire types that both the gateway and the replica speak, defined once. The two binaries
//! never depend on each other; they depend on this crate and on `router-policy`. A light
//! leaf: serde shapes plus the KV block record's byte format, so clients such as the load
//! tester read the typed documents without pulling in a tokenizer (that lives in
//! `warmpath-text`).
//!
//! # Layout
//! - [`openai`]: OpenAI-compatible request, response and error shapes.
//! - [`continuation`]: stream migration: the tokens behind each SSE event, and the
//!   request field with which another replica continues a stream.
//! - [`kv_block`]: the KV block record (one block's K and V, versioned and checksummed)
//!   and its stream framing, for KV transfer between replicas.
//! - [`replica_api`]: endpoint paths, headers, replica info and load documents.
//! - [`tokenizer_spec`]: the tokenizer and chat template a replica publishes.
//! - [`transfer_auth`]: signing and checking the requests of a prefill/decode transfer.

pub mod continuation;
pub mod kv_block;
pub mod openai;
pub mod replica_api;
pub mod tokenizer_spec;
pub mod transfer_auth;

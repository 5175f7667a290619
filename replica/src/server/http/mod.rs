//! The HTTP API: OpenAI-compatible generation endpoints plus the replica's control plane.
//!
//! # Layout
//! - [`generate`]: `POST /v1/chat/completions` and `POST /v1/completions`: parsing,
//!   validation, submission to the engine loop.
//! - [`respond`]: turning the engine's token stream into OpenAI JSON or SSE.
//! - [`trace`]: the `traceparent` trace id on every request's log lines.
//! - [`params`]: sampling fields to sampling parameters, checked against the prompt and
//!   the model's limits (both generation and the KV prefill use it).
//! - [`control`]: health, models, metrics, replica info/load/tokenizer, KV events.
//! - [`kv_prefill`]: `POST /v1/kv/prefill`, a prefill replica streaming a prompt's KV.
//! - [`tokenize`]: `POST /tokenize` and `POST /detokenize` in vLLM's shape.
//! - [`routes`]: the router.

pub mod control;
pub mod generate;
pub mod job;
pub mod kv_prefill;
pub mod params;
mod reader;
pub mod respond;
pub mod resume;
pub mod routes;
pub mod tokenize;
pub mod trace;

pub use routes::{router, PATH_RESET_CACHE};

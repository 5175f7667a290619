//! Engines other than Warmpath's replica (vLLM, SGLang, llama.cpp, any OpenAI server):
//! what the gateway needs to front them without their control plane.
//!
//! # Layout
//! - [`tokenizer`]: a pool's tokenizer from its configured source.
//! - [`metrics`]: load from an engine's Prometheus `/metrics`.
//! - [`kv_events`]: vLLM's and SGLang's KV cache events over ZeroMQ, re-hashed into
//!   Warmpath's events.

pub(crate) mod kv_events;
pub(crate) mod metrics;
pub(crate) mod tokenizer;

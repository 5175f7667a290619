//! Engines other than Warmpath's replica (vLLM, SGLang, llama.cpp, any OpenAI server):
//! what the gateway needs to front them without their control plane.
//!
//! # Layout
//! - [`tokenizer`]: a pool's tokenizer from its configured source.
//! - [`metrics`]: load from an engine's Prometheus `/metrics`.
//! - [`kv_events`]: vLLM's and SGLang's KV cache events over ZeroMQ, re-hashed into
//!   Warmpath's events.
//! - [`namespace`]: the hash namespace of a pool's requests (tenant salt sent as vLLM's
//!   `cache_salt`, LoRA adapters), matching the events' namespaces.

pub(crate) mod kv_events;
pub(crate) mod metrics;
pub(crate) mod namespace;
pub(crate) mod tokenizer;

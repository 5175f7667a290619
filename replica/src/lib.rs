//! # replica
//!
//! Warmpath's inference server: a real Llama-family model (SmolLM2 by default) with a paged
//! KV pool, a radix prefix cache, continuous batching, an OpenAI-compatible API and KV events.
//!
//! # Layout
//! - [`engine`]: model loading (GGUF, HF safetensors, dummy), tokenizer glue, compute
//!   backends, the paged KV pool storage, the forward pass and sampling.
//! - [`server`]: radix cache, scheduler, HTTP API, KV event stream.
//! - [`cli`]: the `generate`, `tokenize` and `bench` subcommands.

pub mod cli;
pub mod engine;
pub mod server;

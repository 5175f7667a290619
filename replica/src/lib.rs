//! # replica
//!
//! Warmpath's inference server: a real Llama-family model (SmolLM2 by default) with a paged
//! KV pool, a radix prefix cache, continuous batching, an OpenAI-compatible API and KV events.
//!
//! # Layout
//! The compute (model loading, kernels, the paged KV pool's storage, the forward pass and
//! sampling) is the `warmpath-engine` crate; this crate serves it.
//!
//! - [`server`]: radix cache, scheduler, HTTP API, KV event stream.
//! - [`cli`]: the `generate`, `tokenize` and `bench` subcommands.
//! - `fuzzing` (feature `fuzzing`, for the `warmpath-fuzz` crate only): the request parsers'
//!   fuzz entry points.

pub mod cli;
#[cfg(feature = "fuzzing")]
pub mod fuzzing;
pub mod server;

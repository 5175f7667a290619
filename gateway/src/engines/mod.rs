//! Engines other than Warmpath's replica (vLLM, SGLang, llama.cpp, any OpenAI server):
//! what the gateway needs to front them without their control plane.
//!
//! # Layout
//! - [`tokenizer`]: a pool's tokenizer from its configured source.

pub mod metrics;
pub mod tokenizer;

//! Inference engines behind the gateway that are not Warmpath replicas (vLLM, SGLang,
//! llama.cpp): what the gateway reads from them.

pub mod metrics;

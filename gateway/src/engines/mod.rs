//! Adapters for third-party inference engines (vLLM, SGLang) as gateway replicas.

pub mod kv_events;

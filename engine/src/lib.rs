//! Model engine. (owner: engine)
//!
//! Loads a Llama-family model (GGUF file, HF safetensors directory, or `dummy:NAME`),
//! owns the paged KV pool and runs ragged batched steps. The radix cache and scheduler
//! (in [`crate::server`]) decide which pages each sequence uses; [`Engine::step`] only
//! reads and writes the pages it is given.
//!
//! # Layout
//! - `engine`: [`Engine`], a loaded model on a backend; `step`: [`StepItem`].
//! - [`source`]: [`ModelSource`] parsing and loading dispatch; `fetch`: the default model.
//! - `gguf`, `gguf_model`: the GGUF tensor table and weights (header, metadata and the
//!   tokenizer are read by `warmpath_text::gguf`).
//! - `hf`: HF `config.json` + safetensors directories.
//! - `dummy`: seeded random models with a byte-level tokenizer (`warmpath_text::bytelevel`).
//! - `quant`, `kernels`, `matrix`: quantised formats and SIMD dot products.
//! - `forward`, `kv`, [`backend`]: the forward pass, KV pool and compute backend trait.
//! - [`sampling`]: token sampling.
//! - `cuda` (feature `cuda`): the CUDA backend (cuBLAS + NVRTC kernels).

mod attention;
pub mod backend;
mod config;
#[cfg(feature = "cuda")]
pub mod cuda;
mod dummy;
mod engine;
mod error;
pub mod fetch;
mod forward;
pub mod generate;
pub mod gguf;
mod gguf_model;
mod hf;
mod kernels;
mod kv;
mod loaded;
pub mod matrix;
pub mod quant;
pub mod sampling;
mod source;
mod step;
mod weights;

pub use backend::Device;
pub use config::{ModelConfig, RopeStyle};
pub use engine::Engine;
pub use error::EngineError;
pub use kv::{KvDtype, KvLayout, PageId};
pub use source::{EngineOptions, ModelSource};
pub use step::StepItem;
pub use weights::{LayerWeights, ModelWeights};

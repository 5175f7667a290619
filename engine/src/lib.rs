//! Model engine. (owner: engine)
//!
//! Loads a Llama-family model (GGUF file, HF safetensors directory, or `dummy:NAME`),
//! owns the paged KV pool and runs ragged batched steps. The radix cache and scheduler
//! (in [`crate::server`]) decide which pages each sequence uses; [`Engine::step`] only
//! reads and writes the pages it is given.
//!
//! # Layout
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
mod error;
pub mod fetch;
mod forward;
pub mod generate;
pub mod gguf;
mod gguf_model;
mod hf;
mod kernels;
mod kv;
pub mod matrix;
pub mod quant;
pub mod sampling;
mod source;
mod weights;

pub use config::{ModelConfig, RopeStyle};
pub use error::EngineError;
pub use kv::{KvDtype, KvLayout, PageId};
pub use source::{EngineOptions, ModelSource};
pub use weights::{LayerWeights, ModelWeights};

pub use backend::Device;

use backend::{ComputeBackend, CpuBackend};
use half::f16;
use warmpath_core::{CheckpointId, TokenId};
use warmpath_text::ChatTokenizer;

/// One sequence's part of a step.
#[derive(Clone, Copy, Debug)]
pub struct StepItem<'a> {
    /// New tokens to compute (a prefill chunk, or one decode token).
    pub tokens: &'a [TokenId],
    /// Position of `tokens[0]`; K/V for positions `0..start_pos` are already in `pages`.
    pub start_pos: usize,
    /// Block table covering positions `0..start_pos + tokens.len()`.
    pub pages: &'a [PageId],
}

/// A loaded model ready to run steps.
pub struct Engine {
    config: ModelConfig,
    checkpoint: CheckpointId,
    model_name: String,
    tokenizer: ChatTokenizer,
    backend: Box<dyn ComputeBackend>,
}

impl std::fmt::Debug for Engine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Engine")
            .field("checkpoint", &self.checkpoint)
            .field("device", &self.backend.device())
            .field("num_pages", &self.backend.num_pages())
            .finish()
    }
}

impl Engine {
    /// Loads `src` and allocates the KV pool, on the CPU.
    pub fn load(src: &ModelSource, opts: &EngineOptions) -> Result<Engine, EngineError> {
        Self::load_on(src, opts, Device::Cpu)
    }

    /// Loads `src` for `device`. The device is checked (and, for CUDA, its driver and
    /// libraries probed) before the model is read, so a missing GPU fails fast.
    pub fn load_on(
        src: &ModelSource,
        opts: &EngineOptions,
        device: Device,
    ) -> Result<Engine, EngineError> {
        Self::load_with(src, opts, device, |w| w)
    }

    /// Loads `src` on the CPU with every matrix dequantised to f32: the exact reference
    /// other backends are checked against (the quantised CPU path rounds activations to
    /// 8 bits, about 1e-2 relative error in the logits on its own).
    #[cfg(feature = "cuda")]
    pub fn load_f32_reference(
        src: &ModelSource,
        opts: &EngineOptions,
    ) -> Result<Engine, EngineError> {
        Self::load_with(src, opts, Device::Cpu, cuda::dequantize_all)
    }

    fn load_with(
        src: &ModelSource,
        opts: &EngineOptions,
        device: Device,
        prepare: fn(ModelWeights) -> ModelWeights,
    ) -> Result<Engine, EngineError> {
        device.check_compiled()?;
        #[cfg(feature = "cuda")]
        if let Device::Cuda(ordinal) = device {
            cuda::probe(ordinal)?;
        }
        let mut loaded = source::load(src)?;
        loaded.weights = prepare(loaded.weights);
        loaded.config.validate()?;
        loaded.weights.validate(&loaded.config)?;
        let tokenizer = ChatTokenizer::from_spec(&loaded.tokenizer)?;
        let layout = KvLayout {
            block_size: opts.block_size,
            n_layers: loaded.config.n_layers,
            kv_dim: loaded.config.kv_dim(),
            dtype: device.kv_dtype(),
        };
        if opts.block_size.get() == 0 {
            return Err(EngineError::InvalidModel(
                "block size must be positive".into(),
            ));
        }
        let threads = if opts.threads == 0 {
            std::thread::available_parallelism().map_or(1, |n| n.get())
        } else {
            opts.threads
        };
        tracing::info!(
            checkpoint = %loaded.checkpoint,
            pages = opts.kv_pages,
            page_bytes = layout.bytes_per_page(),
            threads,
            "engine loaded"
        );
        let backend: Box<dyn ComputeBackend> = match device {
            Device::Cpu => Box::new(CpuBackend::new(
                loaded.config.clone(),
                loaded.weights,
                layout,
                opts.kv_pages,
                threads,
            )?),
            #[cfg(feature = "cuda")]
            Device::Cuda(ordinal) => Box::new(cuda::CudaBackend::new(
                ordinal,
                &loaded.config,
                &loaded.weights,
                layout,
                opts.kv_pages,
            )?),
            #[cfg(not(feature = "cuda"))]
            Device::Cuda(_) => {
                return Err(EngineError::Device(backend::NO_CUDA_FEATURE.into()));
            }
        };
        Ok(Engine {
            config: loaded.config,
            checkpoint: loaded.checkpoint,
            model_name: loaded.model_name,
            tokenizer,
            backend,
        })
    }

    /// Architecture.
    pub fn config(&self) -> &ModelConfig {
        &self.config
    }
    /// Exact weights served, e.g. `smollm2-135m-instruct-q4_1@1a2b...`.
    pub fn checkpoint(&self) -> &CheckpointId {
        &self.checkpoint
    }
    /// Served model name.
    pub fn model_name(&self) -> &str {
        &self.model_name
    }
    /// Tokenizer and chat template.
    pub fn tokenizer(&self) -> &ChatTokenizer {
        &self.tokenizer
    }
    /// Shape of one KV page.
    pub fn kv_layout(&self) -> KvLayout {
        self.backend.kv_layout()
    }
    /// Number of KV pages.
    pub fn num_pages(&self) -> usize {
        self.backend.num_pages()
    }
    /// Device name (`cpu`, `cuda:0`).
    pub fn device(&self) -> &str {
        self.backend.device()
    }

    /// One page's K and V values, in the KV block record's payload order.
    pub fn read_page(&self, page: PageId) -> Result<Vec<f16>, EngineError> {
        self.check_page(page)?;
        self.backend.read_page(page)
    }

    /// Overwrites one page with values in the record's payload order.
    pub fn write_page(&mut self, page: PageId, values: &[f16]) -> Result<(), EngineError> {
        self.check_page(page)?;
        self.backend.write_page(page, values)
    }

    fn check_page(&self, page: PageId) -> Result<(), EngineError> {
        if page.0 as usize >= self.num_pages() {
            return Err(EngineError::InvalidStep(format!(
                "page {} out of range (pool has {})",
                page.0,
                self.num_pages()
            )));
        }
        Ok(())
    }

    /// Runs one ragged batch; returns the logits of each item's last new position.
    pub fn step(&mut self, items: &[StepItem<'_>]) -> Result<Vec<Vec<f32>>, EngineError> {
        self.validate(items)?;
        if items.is_empty() {
            return Ok(Vec::new());
        }
        self.backend.step(items)
    }

    fn validate(&self, items: &[StepItem<'_>]) -> Result<(), EngineError> {
        let bs = self.kv_layout().block_size.get();
        let pages = self.num_pages();
        for (i, it) in items.iter().enumerate() {
            let bad = |m: String| Err(EngineError::InvalidStep(format!("item {i}: {m}")));
            if it.tokens.is_empty() {
                return bad("no tokens".into());
            }
            let end = it.start_pos + it.tokens.len();
            if end > self.config.max_context {
                return bad(format!(
                    "position {end} beyond context {}",
                    self.config.max_context
                ));
            }
            if it.pages.len() * bs < end {
                return bad(format!(
                    "{} pages cannot hold {end} positions",
                    it.pages.len()
                ));
            }
            if let Some(p) = it.pages.iter().find(|p| p.0 as usize >= pages) {
                return bad(format!("page {} out of range (pool has {pages})", p.0));
            }
            if let Some(t) = it
                .tokens
                .iter()
                .find(|t| t.0 as usize >= self.config.vocab_size)
            {
                return bad(format!("token {} out of vocabulary", t.0));
            }
        }
        Ok(())
    }
}

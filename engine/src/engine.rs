//! [`Engine`]: a loaded model (config, checkpoint, tokenizer) on a compute backend, with
//! its paged KV pool; loading dispatch by device and step validation.

use crate::backend::{ComputeBackend, CpuBackend, Device};
use crate::config::ModelConfig;
#[cfg(feature = "cuda")]
use crate::cuda;
use crate::error::EngineError;
use crate::kv::{KvLayout, PageId};
use crate::source::{self, EngineOptions, ModelSource};
use crate::step::StepItem;
use crate::weights::ModelWeights;
use half::f16;
use warmpath_core::CheckpointId;
use warmpath_text::ChatTokenizer;

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
                return Err(EngineError::Device(crate::backend::NO_CUDA_FEATURE.into()));
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

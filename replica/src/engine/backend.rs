//! Compute backends. The CPU backend runs everything here; a CUDA backend can implement
//! the same trait with device-resident weights and its own KV pool.

use super::config::ModelConfig;
use super::forward::forward;
use super::kv::{KvLayout, KvPool};
use super::weights::ModelWeights;
use super::{EngineError, StepItem};

/// Executes steps of one model. Called from one thread at a time (the engine is `Send`,
/// and `step` takes `&mut self`).
pub trait ComputeBackend: Send {
    /// Short device name, e.g. `cpu` or `cuda:0`.
    fn device(&self) -> &str;
    /// Shape of one KV page.
    fn kv_layout(&self) -> KvLayout;
    /// Number of KV pages.
    fn num_pages(&self) -> usize;
    /// Runs one ragged batch (already validated by the engine) and returns the logits of
    /// each item's last new position.
    fn step(&mut self, items: &[StepItem<'_>]) -> Result<Vec<Vec<f32>>, EngineError>;
}

/// CPU backend: quantised weights in memory, rayon pool of `threads` workers.
pub struct CpuBackend {
    config: ModelConfig,
    weights: ModelWeights,
    kv: KvPool,
    pool: rayon::ThreadPool,
}

impl CpuBackend {
    /// Builds the backend with a KV pool of `num_pages` pages.
    pub fn new(
        config: ModelConfig,
        weights: ModelWeights,
        layout: KvLayout,
        num_pages: usize,
        threads: usize,
    ) -> Result<Self, EngineError> {
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(threads)
            .thread_name(|i| format!("engine-{i}"))
            .build()
            .map_err(|e| EngineError::ThreadPool(e.to_string()))?;
        Ok(Self {
            config,
            weights,
            kv: KvPool::new(layout, num_pages),
            pool,
        })
    }
}

impl ComputeBackend for CpuBackend {
    fn device(&self) -> &str {
        "cpu"
    }
    fn kv_layout(&self) -> KvLayout {
        self.kv.layout()
    }
    fn num_pages(&self) -> usize {
        self.kv.num_pages()
    }
    fn step(&mut self, items: &[StepItem<'_>]) -> Result<Vec<Vec<f32>>, EngineError> {
        let Self {
            config,
            weights,
            kv,
            pool,
        } = self;
        Ok(pool.install(|| forward(config, weights, kv, items)))
    }
}

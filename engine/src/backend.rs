//! Compute backends. The CPU backend runs everything here; a CUDA backend can implement
//! the same trait with device-resident weights and its own KV pool.

use super::config::ModelConfig;
use super::forward::forward;
use super::kv::KvDtype;
use super::kv::{KvLayout, KvPool, PageId};
use super::weights::ModelWeights;
use crate::error::EngineError;
use crate::step::StepItem;
use half::f16;

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
    /// A copy of one page's values in the KV block record's payload order. Backends that
    /// cannot export (CUDA, for now) say so; the caller then transfers nothing.
    fn read_page(&self, page: PageId) -> Result<Vec<f16>, EngineError> {
        let _ = page;
        Err(EngineError::Device(format!(
            "{}: KV page export is not supported on this backend",
            self.device()
        )))
    }
    /// Overwrites one page with values in the record's payload order.
    fn write_page(&mut self, page: PageId, values: &[f16]) -> Result<(), EngineError> {
        let _ = (page, values);
        Err(EngineError::Device(format!(
            "{}: KV page import is not supported on this backend",
            self.device()
        )))
    }
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
    fn read_page(&self, page: PageId) -> Result<Vec<f16>, EngineError> {
        Ok(self.kv.page(page).to_vec())
    }
    fn write_page(&mut self, page: PageId, values: &[f16]) -> Result<(), EngineError> {
        if values.len() != self.kv.layout().values_per_page() {
            return Err(EngineError::InvalidStep(format!(
                "page import of {} values; a page holds {}",
                values.len(),
                self.kv.layout().values_per_page()
            )));
        }
        self.kv.set_page(page, values);
        Ok(())
    }
}

/// Where an engine runs its steps: `cpu`, or `cuda:N` (`cuda` alone means `cuda:0`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Device {
    /// The CPU backend.
    #[default]
    Cpu,
    /// The CUDA backend on the GPU with this ordinal (needs the `cuda` cargo feature).
    Cuda(usize),
}

impl Device {
    /// How this device's backend stores KV values: f16 on the CPU (as llama.cpp does),
    /// f32 in the CUDA backend's pool.
    pub fn kv_dtype(self) -> KvDtype {
        match self {
            Device::Cpu => KvDtype::F16,
            Device::Cuda(_) => KvDtype::F32,
        }
    }
}

/// Why `--device cuda:N` cannot work in a build without the `cuda` feature.
pub const NO_CUDA_FEATURE: &str = "this replica was built without the cuda feature \
    (rebuild with `cargo build -p replica --features cuda`); use --device cpu";

impl Device {
    /// Whether this build can run on the device at all (the driver is probed at load).
    pub fn check_compiled(self) -> Result<(), EngineError> {
        match self {
            Device::Cpu => Ok(()),
            Device::Cuda(_) if cfg!(feature = "cuda") => Ok(()),
            Device::Cuda(_) => Err(EngineError::Device(format!("{self}: {NO_CUDA_FEATURE}"))),
        }
    }
}

impl std::str::FromStr for Device {
    type Err = EngineError;
    /// Parses `cpu`, `cuda` or `cuda:N`.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let t = s.trim().to_ascii_lowercase();
        match t.as_str() {
            "cpu" => Ok(Device::Cpu),
            "cuda" => Ok(Device::Cuda(0)),
            _ => t
                .strip_prefix("cuda:")
                .and_then(|n| n.parse::<usize>().ok())
                .map(Device::Cuda)
                .ok_or_else(|| {
                    EngineError::Device(format!("unknown device {s:?}: use cpu or cuda:N"))
                }),
        }
    }
}

impl std::fmt::Display for Device {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Device::Cpu => write!(f, "cpu"),
            Device::Cuda(n) => write!(f, "cuda:{n}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn device_names_parse_and_print() {
        assert_eq!("cpu".parse::<Device>().unwrap(), Device::Cpu);
        assert_eq!("cuda".parse::<Device>().unwrap(), Device::Cuda(0));
        assert_eq!(" CUDA:3 ".parse::<Device>().unwrap(), Device::Cuda(3));
        assert_eq!(Device::Cuda(1).to_string(), "cuda:1");
        for bad in ["gpu", "cuda:", "cuda:x", "cuda:-1"] {
            let e = bad.parse::<Device>().unwrap_err().to_string();
            assert!(e.contains("unknown device") && e.contains(bad), "{e}");
        }
    }

    #[test]
    fn cuda_without_the_feature_is_a_clear_error() {
        assert!(Device::Cpu.check_compiled().is_ok());
        let r = Device::Cuda(0).check_compiled();
        if cfg!(feature = "cuda") {
            assert!(r.is_ok());
        } else {
            let e = r.unwrap_err().to_string();
            assert!(
                e.contains("cuda:0") && e.contains("built without the cuda feature"),
                "{e}"
            );
        }
    }
}

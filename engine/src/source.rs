//! Where a model comes from, and the loading dispatch.

use super::loaded::Loaded;
use super::{dummy, fetch, gguf_model, hf};
use crate::error::EngineError;
use std::path::{Path, PathBuf};
use std::str::FromStr;
use warmpath_core::{BlockSize, CheckpointId};

/// A model to load.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ModelSource {
    /// SmolLM2-135M-Instruct Q4_1, fetched into the cache directory if missing.
    Default,
    /// A `.gguf` file or a HF checkpoint directory.
    Path(PathBuf),
    /// `dummy:NAME[@SEED]`: seeded random weights (`tiny`, `smollm2-135m`).
    Dummy(String),
}

impl FromStr for ModelSource {
    type Err = std::convert::Infallible;
    /// `""` or `default` is [`ModelSource::Default`], `dummy:NAME` a dummy, anything else a path.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let s = s.trim();
        Ok(if s.is_empty() || s == "default" {
            ModelSource::Default
        } else if let Some(name) = s.strip_prefix("dummy:") {
            ModelSource::Dummy(name.to_string())
        } else {
            ModelSource::Path(PathBuf::from(s))
        })
    }
}

impl std::fmt::Display for ModelSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ModelSource::Default => write!(f, "default"),
            ModelSource::Path(p) => write!(f, "{}", p.display()),
            ModelSource::Dummy(n) => write!(f, "dummy:{n}"),
        }
    }
}

/// Engine sizing.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EngineOptions {
    /// KV pages to allocate.
    pub kv_pages: usize,
    /// Positions per page (= hashing block size).
    pub block_size: BlockSize,
    /// Worker threads; 0 = all cores.
    pub threads: usize,
}

impl Default for EngineOptions {
    fn default() -> Self {
        Self {
            kv_pages: 1024,
            block_size: BlockSize::DEFAULT,
            threads: 0,
        }
    }
}

pub(crate) fn load(src: &ModelSource) -> Result<Loaded, EngineError> {
    match src {
        ModelSource::Default => load_path(&fetch::ensure_default_model()?),
        ModelSource::Path(p) => load_path(p),
        ModelSource::Dummy(name) => {
            let m = dummy::build(name)?;
            Ok(Loaded {
                checkpoint: CheckpointId::new(format!("dummy:{}@{}", name_only(name), m.seed)),
                model_name: format!("dummy:{}", name_only(name)),
                config: m.config,
                weights: m.weights,
                tokenizer: m.tokenizer,
            })
        }
    }
}

fn name_only(spec: &str) -> &str {
    spec.split('@').next().unwrap_or(spec)
}

fn load_path(p: &Path) -> Result<Loaded, EngineError> {
    if p.is_dir() {
        hf::load(p)
    } else {
        gguf_model::load(p)
    }
}

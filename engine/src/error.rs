//! The engine's error type.

use std::path::PathBuf;

/// Everything that can go wrong loading a model or running a step.
#[derive(Debug, thiserror::Error)]
pub enum EngineError {
    /// Reading a model file failed.
    #[error("i/o error on {path}: {source}")]
    Io {
        /// File or directory involved.
        path: PathBuf,
        /// Underlying error.
        source: std::io::Error,
    },
    /// A GGUF file is malformed at `offset`.
    #[error("invalid GGUF at byte offset {offset}: {msg}")]
    Gguf {
        /// Byte offset where the problem was found.
        offset: u64,
        /// What was wrong.
        msg: String,
    },
    /// A tensor has a type the engine cannot compute with.
    #[error("tensor {name}: unsupported type {ty}")]
    UnsupportedTensorType {
        /// Tensor name.
        name: String,
        /// Type name or number.
        ty: String,
    },
    /// A required tensor is missing or has the wrong shape.
    #[error("tensor {name}: {msg}")]
    Tensor {
        /// Tensor name.
        name: String,
        /// What was wrong.
        msg: String,
    },
    /// Model metadata is missing or inconsistent.
    #[error("invalid model: {0}")]
    InvalidModel(String),
    /// A safetensors file is malformed.
    #[error("invalid safetensors file {path}: {msg}")]
    Safetensors {
        /// File involved.
        path: PathBuf,
        /// What was wrong.
        msg: String,
    },
    /// Unknown `dummy:NAME`.
    #[error("unknown dummy model {0:?} (known: tiny, smollm2-135m, llama-1b)")]
    UnknownDummy(String),
    /// Fetching the default model failed.
    #[error("fetching the default model failed: {0}")]
    Fetch(String),
    /// Tokenizer construction or use failed.
    #[error(transparent)]
    Text(#[from] warmpath_text::TextError),
    /// A step request is inconsistent (bad page table, empty item, out-of-range id).
    #[error("invalid step: {0}")]
    InvalidStep(String),
    /// The thread pool could not be built.
    #[error("thread pool: {0}")]
    ThreadPool(String),
    /// The compute device is unavailable or failed (driver, library, memory, kernel).
    #[error("device: {0}")]
    Device(String),
}

impl EngineError {
    pub(crate) fn gguf(offset: u64, msg: impl Into<String>) -> Self {
        Self::Gguf {
            offset,
            msg: msg.into(),
        }
    }
    pub(crate) fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        Self::Io {
            path: path.into(),
            source,
        }
    }
}

//! The crate's error type.

use std::path::PathBuf;

/// Errors from building or using a tokenizer.
#[derive(Debug, thiserror::Error)]
pub enum TextError {
    /// The HF tokenizer JSON could not be loaded.
    #[error("invalid tokenizer definition: {0}")]
    InvalidTokenizer(String),
    /// Encoding or decoding failed inside the tokenizer.
    #[error("tokenizer failed: {0}")]
    Tokenizer(String),
    /// The spec has no chat template.
    #[error("the model has no chat template")]
    NoChatTemplate,
    /// The chat template failed to compile or render.
    #[error("chat template error: {0}")]
    Template(String),
    /// A special token named by the spec is not in the vocabulary.
    #[error("special token {0:?} is not in the vocabulary")]
    UnknownSpecialToken(String),
    /// A tokenizer file could not be opened or read.
    #[error("{}: {source}", path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// Underlying error.
        source: std::io::Error,
    },
    /// A GGUF file is malformed.
    #[error("{}: {source}", file.display())]
    Gguf {
        /// The file.
        file: PathBuf,
        /// What was wrong, and where.
        source: crate::gguf::reader::GgufError,
    },
    /// A tokenizer file is not what it should be (not JSON, not an object, not UTF-8).
    #[error("{}: {problem}", path.display())]
    File {
        /// The file.
        path: PathBuf,
        /// What was wrong.
        problem: String,
    },
    /// A metadata key (GGUF metadata, `tokenizer_config.json`) is missing or unusable.
    #[error("{}: metadata key {key} {problem}", file.display())]
    MetadataKey {
        /// The file.
        file: PathBuf,
        /// The key.
        key: String,
        /// What is wrong with it ("missing", "is not an array", ...).
        problem: String,
    },
}

//! # warmpath-text
//!
//! Tokenizer and chat template shared by the gateway and the replica.
//!
//! The replica builds a [`TokenizerSpec`] from its model files (GGUF metadata, a HF
//! `tokenizer.json`, or a synthetic byte-level vocabulary) and serves it as JSON; the
//! gateway rebuilds the identical [`ChatTokenizer`] from that JSON, so both sides produce
//! the same token ids (and so the same block hashes) for the same request. The spec itself
//! is a wire type of `warmpath-protocol`, re-exported here.
//!
//! # Layout
//! - [`ChatMessage`]: one conversation turn, the chat template's input.
//! - [`tokenizer`]: [`ChatTokenizer`], encode/decode and chat rendering.
//! - [`fast_bpe`]: [`FastByteLevel`], the byte-level BPE split without the backtracking regex.
//! - [`literal`]: message text is literal; special tokens come only from the template.
//! - [`stream`]: [`StreamDecoder`], incremental decoding that only yields complete UTF-8.
//! - [`bytelevel`]: GPT-2's byte alphabet and byte-level BPE specs built in code (dummy
//!   models, mock replicas, benchmarks and tests).

pub mod bytelevel;
mod fast_bpe;
mod literal;
mod message;
mod stream;
mod template;
mod tokenizer;

pub use fast_bpe::FastByteLevel;
pub use literal::ChatSegment;
pub use message::ChatMessage;
pub use stream::StreamDecoder;
pub use tokenizer::ChatTokenizer;
pub use warmpath_protocol::tokenizer_spec::TokenizerSpec;

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
}

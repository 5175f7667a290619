//! # warmpath-text
//!
//! Tokenizer and chat template shared by the gateway and the replica.
//!
//! A [`TokenizerSpec`] is built from model files (GGUF metadata, HF tokenizer files: both
//! read here, by the replica and by a gateway fronting engines that publish no tokenizer)
//! or from a synthetic byte-level vocabulary. The replica serves its spec as JSON; the
//! gateway rebuilds the identical [`ChatTokenizer`] from that JSON (or from the same local
//! files), so both sides produce the same token ids (and so the same block hashes) for the
//! same request. The spec itself
//! is a wire type of `warmpath-protocol`, re-exported here.
//!
//! # Layout
//! - [`ChatMessage`]: one conversation turn, the chat template's input.
//! - [`ChatInput`]: a whole chat request's template input (tools, tool calls, documents,
//!   `chat_template_kwargs`), prepared as vLLM prepares it for HF `apply_chat_template`.
//! - [`tokenizer`]: [`ChatTokenizer`], encode/decode and chat rendering.
//! - [`fast_bpe`]: [`FastByteLevel`], the byte-level BPE split without the backtracking regex.
//! - [`literal`]: message text is literal; special tokens come only from the template.
//! - [`stream`]: [`StreamDecoder`], incremental decoding that only yields complete UTF-8.
//! - [`bytelevel`]: GPT-2's byte alphabet and byte-level BPE specs built in code (dummy
//!   models, mock replicas, benchmarks and tests).
//! - [`gguf`]: a GGUF file's header and metadata, and the spec its `tokenizer.ggml.*` keys
//!   describe (read without touching the weights).
//! - [`hf_files`]: the spec of Hugging Face tokenizer files (`tokenizer.json`,
//!   `tokenizer_config.json`, `chat_template.jinja`).
//! - [`TokenizerSource`]: one of those, as a gateway configures it, loaded into a
//!   [`LoadedTokenizer`] (the spec and a content-hash checkpoint hint).

pub mod bytelevel;
mod chat_input;
mod digest;
mod error;
mod fast_bpe;
pub mod gguf;
pub mod hf_files;
mod hf_json;
mod literal;
mod literal_input;
mod loaded;
mod message;
mod pairs;
mod py_repr;
mod source;
mod stream;
mod strftime;
mod template;
mod tokenizer;

pub use chat_input::{ChatInput, ChatInputError, RENDER_FIELDS};
pub use error::TextError;
pub use fast_bpe::FastByteLevel;
pub use literal::ChatSegment;
pub use loaded::LoadedTokenizer;
pub use message::ChatMessage;
pub use source::TokenizerSource;
pub use stream::StreamDecoder;
pub use tokenizer::ChatTokenizer;
pub use warmpath_protocol::tokenizer_spec::TokenizerSpec;

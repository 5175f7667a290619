//! GGUF files as far as the tokenizer needs them: the container's header and metadata
//! ([`GgufReader`]), and the [`TokenizerSpec`](crate::TokenizerSpec) that the `tokenizer.ggml.*` keys describe
//! ([`tokenizer_spec`]).
//!
//! A file is read through a buffer up to the end of its metadata and no further: the
//! tensor table and the weights are never touched, so a multi-GB model yields its tokenizer
//! in milliseconds. The replica reads its tensor table with the same [`GgufReader`].

mod file;
pub(crate) mod reader;
mod tokenizer;
mod value;

pub use file::{load_tokenizer, read_file, tokenizer_spec_from_file, FileMetadata};
pub use reader::{read_metadata, GgufError, GgufMetadata, GgufReader};
pub use tokenizer::tokenizer_spec;
pub use value::Value;

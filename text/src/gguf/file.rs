//! A GGUF file on disk: its header and metadata read through a buffer, and the tokenizer
//! they describe.

use super::reader::{GgufMetadata, GgufReader};
use super::tokenizer::tokenizer_spec;
use crate::digest::{Counted, Hashed};
use crate::error::TextError;
use crate::loaded::LoadedTokenizer;
use std::io::BufReader;
use std::path::Path;
use warmpath_protocol::tokenizer_spec::TokenizerSpec;

/// Buffer size for metadata reads: large enough that the token arrays stream in few reads.
const BUFFER: usize = 64 * 1024;

/// What [`read_file`] took from a GGUF file.
#[derive(Clone, Debug, PartialEq)]
pub struct FileMetadata {
    /// The header and metadata.
    pub metadata: GgufMetadata,
    /// The checkpoint hint: the short SHA-256 of the header and metadata bytes (see
    /// [`LoadedTokenizer::checkpoint_hint`]).
    pub checkpoint_hint: String,
    /// Bytes read from the file (the metadata plus at most one buffer of read-ahead).
    pub bytes_read: u64,
    /// The file's size.
    pub file_len: u64,
}

/// Reads the header and metadata of the GGUF file at `path` through a buffer, stopping
/// at the tensor table. Errors name the file.
pub fn read_file(path: &Path) -> Result<FileMetadata, TextError> {
    let io = |source| TextError::Io {
        path: path.to_path_buf(),
        source,
    };
    let file = std::fs::File::open(path).map_err(io)?;
    let file_len = file.metadata().map_err(io)?.len();
    let mut reader = GgufReader::new(
        Hashed::new(BufReader::with_capacity(BUFFER, Counted::new(file))),
        file_len,
    );
    let metadata = reader.metadata().map_err(|source| TextError::Gguf {
        file: path.to_path_buf(),
        source,
    })?;
    let hashed = reader.into_inner();
    let bytes_read = hashed.inner().get_ref().bytes();
    Ok(FileMetadata {
        metadata,
        checkpoint_hint: hashed.hex(),
        bytes_read,
        file_len,
    })
}

/// The tokenizer spec and checkpoint hint of the GGUF file at `path`, from its metadata
/// alone.
pub fn load_tokenizer(path: &Path) -> Result<LoadedTokenizer, TextError> {
    let read = read_file(path)?;
    Ok(LoadedTokenizer {
        spec: tokenizer_spec(&read.metadata, path)?,
        checkpoint_hint: read.checkpoint_hint,
    })
}

/// The tokenizer spec of the GGUF file at `path`, from its metadata alone.
pub fn tokenizer_spec_from_file(path: &Path) -> Result<TokenizerSpec, TextError> {
    Ok(load_tokenizer(path)?.spec)
}

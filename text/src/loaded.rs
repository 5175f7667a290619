//! [`LoadedTokenizer`]: a [`TokenizerSpec`] read from local model files, with a content hash
//! of what was read (the checkpoint hint).

use warmpath_protocol::tokenizer_spec::TokenizerSpec;

/// A tokenizer spec read from local files (a GGUF file or Hugging Face tokenizer files).
#[derive(Clone, Debug, PartialEq)]
pub struct LoadedTokenizer {
    /// The tokenizer and chat template, as a replica would publish them.
    pub spec: TokenizerSpec,
    /// A stable content hash of the bytes the spec was built from: 16 lowercase hex digits
    /// (the first 8 bytes of a SHA-256). The same files give the same hint on every machine
    /// and every run; any change to those bytes changes it.
    ///
    /// - GGUF: the hash of the header and metadata (everything before the tensor table), so
    ///   it is computed without reading the weights. Two GGUF files with equal metadata but
    ///   different weights (a re-quantisation that kept every key) share a hint.
    /// - Hugging Face: the hash of `tokenizer.json`, then the `tokenizer_config.json` and the
    ///   chat template file when they were read, each tagged and length-prefixed.
    ///
    /// It is not the replica's checkpoint id (that hashes the whole model file); a gateway
    /// fronting an engine that publishes no checkpoint can build one from it, e.g.
    /// `"{model}@{hint}"`.
    pub checkpoint_hint: String,
}

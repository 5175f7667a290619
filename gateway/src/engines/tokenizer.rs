//! A pool's tokenizer, built from its configured source: a GGUF file's metadata, a Hugging
//! Face `tokenizer.json` plus chat template, or none (text units).

use crate::config::{TokenizerConfig, TokenizerSource};
use crate::tokenize::{CachedTokenizer, PromptEncoder};
use warmpath_text::TokenizerSpec;

/// Why a pool's tokenizer could not be built; the message names the file.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct TokenizerLoadError(String);

/// The tokenizer spec a source describes (`None` for `tokenizer: none`), read by
/// `warmpath-text` from the local files (a GGUF file's metadata only, never its weights).
pub fn spec(source: &TokenizerSource) -> Result<Option<TokenizerSpec>, TokenizerLoadError> {
    let text_source = match source {
        TokenizerSource::None => return Ok(None),
        TokenizerSource::Gguf(path) => warmpath_text::TokenizerSource::Gguf(path.clone()),
        TokenizerSource::Hf(files) => warmpath_text::TokenizerSource::HuggingFace {
            tokenizer: files.tokenizer.clone(),
            template: files.template.clone(),
        },
    };
    text_source
        .load()
        .map(|loaded| loaded.map(|l| l.spec))
        .map_err(|e| TokenizerLoadError(e.to_string()))
}

/// Checks that a source builds a working tokenizer (config validation, at start and on
/// every reload).
pub fn check(source: &TokenizerSource) -> Result<(), TokenizerLoadError> {
    if let Some(s) = spec(source)? {
        warmpath_text::ChatTokenizer::from_spec(&s)
            .map_err(|e| TokenizerLoadError(format!("the tokenizer does not build: {e}")))?;
    }
    Ok(())
}

/// The prompt encoder of a pool.
pub fn encoder(
    source: &TokenizerSource,
    cfg: &TokenizerConfig,
) -> Result<PromptEncoder, TokenizerLoadError> {
    match spec(source)? {
        None => Ok(PromptEncoder::TextUnits),
        Some(s) => CachedTokenizer::new(&s, cfg.cache_entries, cfg.min_cached_bytes)
            .map(PromptEncoder::Tokens)
            .map_err(|e| TokenizerLoadError(format!("the tokenizer does not build: {e}"))),
    }
}

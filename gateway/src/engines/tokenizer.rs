//! A pool's tokenizer, built from its configured source: a GGUF file's metadata, a Hugging
//! Face `tokenizer.json` plus chat template, or none (text units); the pool's
//! `chat_template` file, when set, replaces the source's template.

use crate::config::{TokenizerConfig, TokenizerSource};
use crate::encoder::PromptEncoder;
use crate::tokenize::CachedTokenizer;
use std::path::Path;
use warmpath_text::TokenizerSpec;

/// Why a pool's tokenizer could not be built; the message names the file.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub(crate) struct TokenizerLoadError(String);

/// The tokenizer spec a source describes (`None` for `tokenizer: none`), read by
/// `warmpath-text` from the local files (a GGUF file's metadata only, never its weights).
pub(crate) fn spec(source: &TokenizerSource) -> Result<Option<TokenizerSpec>, TokenizerLoadError> {
    let Some(text_source) = source.to_text_source() else {
        return Ok(None);
    };
    text_source
        .load()
        .map(|loaded| loaded.map(|l| l.spec))
        .map_err(|e| TokenizerLoadError(e.to_string()))
}

/// The prompt encoder of a pool, its template replaced by `chat_template`'s when given.
pub(crate) fn encoder(
    source: &TokenizerSource,
    chat_template: Option<&Path>,
    cfg: &TokenizerConfig,
) -> Result<PromptEncoder, TokenizerLoadError> {
    match spec(source)? {
        None => Ok(PromptEncoder::TextUnits),
        Some(mut s) => {
            if let Some(path) = chat_template {
                s.chat_template =
                    Some(crate::config::chat_template::read(path).map_err(TokenizerLoadError)?);
            }
            CachedTokenizer::new(&s, cfg.cache_entries, cfg.min_cached_bytes)
                .map(PromptEncoder::Tokens)
                .map_err(|e| TokenizerLoadError(format!("the tokenizer does not build: {e}")))
        }
    }
}

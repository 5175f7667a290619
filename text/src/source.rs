//! [`TokenizerSource`]: where a gateway loads a tokenizer from itself, for engines that do
//! not publish Warmpath's `/v1/replica/tokenizer` (vLLM, SGLang, llama.cpp): a GGUF file,
//! Hugging Face tokenizer files, or none.

use crate::error::TextError;
use crate::gguf;
use crate::hf_files::HfFiles;
use crate::loaded::LoadedTokenizer;
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

/// Where a tokenizer comes from. In YAML: `gguf: /models/m.gguf`,
/// `hugging_face: {tokenizer: /models/m}` (a directory or a `tokenizer.json`, with an
/// optional `template:` file), or `none`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub enum TokenizerSource {
    /// A GGUF model file: only its header and metadata are read.
    Gguf(PathBuf),
    /// Hugging Face tokenizer files.
    HuggingFace {
        /// A directory (`tokenizer.json`, and `tokenizer_config.json` and
        /// `chat_template.jinja` where present), or a `tokenizer.json` file (read alone).
        tokenizer: PathBuf,
        /// A `tokenizer_config.json` or `.jinja` chat template file, taking precedence over
        /// the directory's (see [`HfFiles::with_template`]).
        #[serde(default)]
        template: Option<PathBuf>,
    },
    /// No local tokenizer.
    #[default]
    None,
}

impl TokenizerSource {
    /// The source a bare path names: a `.gguf` file is [`TokenizerSource::Gguf`]; anything
    /// else (a directory, a `tokenizer.json`) is [`TokenizerSource::HuggingFace`].
    pub fn from_path(path: impl Into<PathBuf>) -> Self {
        let path = path.into();
        if path
            .extension()
            .is_some_and(|e| e.eq_ignore_ascii_case("gguf"))
        {
            TokenizerSource::Gguf(path)
        } else {
            TokenizerSource::HuggingFace {
                tokenizer: path,
                template: None,
            }
        }
    }

    /// Reads the tokenizer: `None` for [`TokenizerSource::None`]. Errors name the file, and
    /// the key where one is missing or wrong.
    pub fn load(&self) -> Result<Option<LoadedTokenizer>, TextError> {
        match self {
            TokenizerSource::Gguf(path) => gguf::load_tokenizer(path).map(Some),
            TokenizerSource::HuggingFace {
                tokenizer,
                template,
            } => hf_files(tokenizer, template.as_deref()).load().map(Some),
            TokenizerSource::None => Ok(None),
        }
    }

    /// The main file this source reads, for logs.
    pub fn path(&self) -> Option<&Path> {
        match self {
            TokenizerSource::Gguf(p) => Some(p),
            TokenizerSource::HuggingFace { tokenizer, .. } => Some(tokenizer),
            TokenizerSource::None => None,
        }
    }
}

/// The HF files of `tokenizer` (a directory or a `tokenizer.json`) with `template` on top.
fn hf_files(tokenizer: &Path, template: Option<&Path>) -> HfFiles {
    let files = if tokenizer.is_dir() {
        HfFiles::in_dir(tokenizer)
    } else {
        HfFiles::from_files(tokenizer, None)
    };
    match template {
        Some(t) => files.with_template(t),
        None => files,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bare_paths_name_their_kind() {
        assert_eq!(
            TokenizerSource::from_path("/m/SmolLM2.Q4_1.GGUF"),
            TokenizerSource::Gguf("/m/SmolLM2.Q4_1.GGUF".into())
        );
        assert_eq!(
            TokenizerSource::from_path("/m/tokenizer.json"),
            TokenizerSource::HuggingFace {
                tokenizer: "/m/tokenizer.json".into(),
                template: None
            }
        );
        assert!(matches!(TokenizerSource::None.load(), Ok(None)));
        assert_eq!(TokenizerSource::None.path(), None);
    }

    #[test]
    fn the_config_shape_reads_from_json() {
        let gguf: TokenizerSource = serde_json::from_str(r#"{"gguf": "/m/m.gguf"}"#).expect("gguf");
        assert_eq!(gguf, TokenizerSource::Gguf("/m/m.gguf".into()));
        let hf: TokenizerSource = serde_json::from_str(
            r#"{"hugging_face": {"tokenizer": "/m", "template": "/m/t.jinja"}}"#,
        )
        .expect("hf");
        assert_eq!(
            hf,
            TokenizerSource::HuggingFace {
                tokenizer: "/m".into(),
                template: Some("/m/t.jinja".into())
            }
        );
        let none: TokenizerSource = serde_json::from_str(r#""none""#).expect("none");
        assert_eq!(none, TokenizerSource::None);
        let typo = serde_json::from_str::<TokenizerSource>(
            r#"{"hugging_face": {"tokenizer": "/m", "templte": "x"}}"#,
        );
        assert!(typo.is_err(), "unknown keys are refused");
    }
}

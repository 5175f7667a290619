//! Hugging Face tokenizer files: `tokenizer.json`, plus the chat template and special tokens
//! of `tokenizer_config.json` and/or `chat_template.jinja` (the newer layout), read into a
//! [`TokenizerSpec`] the way `transformers` reads them.

use crate::digest::short_hex;
use crate::error::TextError;
use crate::loaded::LoadedTokenizer;
use serde_json::Value;
use sha2::{Digest, Sha256};
use std::path::{Path, PathBuf};
use warmpath_protocol::tokenizer_spec::TokenizerSpec;

/// The tokenizer file of a HF directory.
pub const TOKENIZER_JSON: &str = "tokenizer.json";
/// The tokenizer configuration of a HF directory (chat template, BOS/EOS tokens).
pub const TOKENIZER_CONFIG: &str = "tokenizer_config.json";
/// The chat template file of the newer HF layout.
pub const CHAT_TEMPLATE_JINJA: &str = "chat_template.jinja";

/// The files a HF tokenizer is read from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HfFiles {
    /// `tokenizer.json`: the tokenizer itself.
    pub tokenizer: PathBuf,
    /// `tokenizer_config.json` (or any JSON object with its keys): `chat_template`,
    /// `bos_token`, `eos_token` (strings or `{"content": ..}` AddedToken objects) and
    /// `add_bos_token`.
    pub config: Option<PathBuf>,
    /// A Jinja chat template file; it takes precedence over the config's `chat_template`,
    /// as in `transformers`.
    pub template: Option<PathBuf>,
}

impl HfFiles {
    /// The files of directory `dir`: `tokenizer.json`, and `tokenizer_config.json` and
    /// `chat_template.jinja` where they exist.
    pub fn in_dir(dir: &Path) -> Self {
        let optional = |name: &str| Some(dir.join(name)).filter(|p| p.is_file());
        Self {
            tokenizer: dir.join(TOKENIZER_JSON),
            config: optional(TOKENIZER_CONFIG),
            template: optional(CHAT_TEMPLATE_JINJA),
        }
    }

    /// `tokenizer_json`, with `template` if given: see [`Self::with_template`].
    pub fn from_files(tokenizer_json: &Path, template: Option<&Path>) -> Self {
        let files = Self {
            tokenizer: tokenizer_json.to_path_buf(),
            config: None,
            template: None,
        };
        match template {
            Some(t) => files.with_template(t),
            None => files,
        }
    }

    /// These files with the chat template taken from `path` alone: a `.jinja` file is the
    /// template itself (the config, if any, still gives the special tokens); any other file
    /// is read as `tokenizer_config.json` and replaces both.
    pub fn with_template(self, path: &Path) -> Self {
        if path.extension().is_some_and(|e| e == "jinja") {
            Self {
                template: Some(path.to_path_buf()),
                ..self
            }
        } else {
            Self {
                config: Some(path.to_path_buf()),
                template: None,
                ..self
            }
        }
    }

    /// Reads the files. Errors name the file, and the key where one is wrong.
    pub fn load(&self) -> Result<LoadedTokenizer, TextError> {
        let mut hasher = Sha256::new();
        let mut read = |tag: &str, path: &Path| -> Result<Vec<u8>, TextError> {
            let bytes = std::fs::read(path).map_err(|source| TextError::Io {
                path: path.to_path_buf(),
                source,
            })?;
            for part in [tag.as_bytes(), bytes.as_slice()] {
                hasher.update((part.len() as u64).to_le_bytes());
                hasher.update(part);
            }
            Ok(bytes)
        };
        let tokenizer = json_object(&self.tokenizer, &read("tokenizer", &self.tokenizer)?)?;
        if tokenizer.get("model").is_none_or(|m| !m.is_object()) {
            return Err(TextError::MetadataKey {
                file: self.tokenizer.clone(),
                key: "model".into(),
                problem: "missing: not a tokenizers `tokenizer.json`".into(),
            });
        }
        let mut spec = TokenizerSpec {
            tokenizer,
            chat_template: None,
            bos_token: None,
            eos_token: None,
            stop_tokens: Vec::new(),
            add_bos: false,
        };
        if let Some(path) = &self.config {
            apply_config(&mut spec, path, &json_object(path, &read("config", path)?)?)?;
        }
        if let Some(path) = &self.template {
            let text = String::from_utf8(read("template", path)?).map_err(|_| TextError::File {
                path: path.clone(),
                problem: "is not UTF-8".into(),
            })?;
            spec.chat_template = Some(text);
        }
        Ok(LoadedTokenizer {
            spec,
            checkpoint_hint: short_hex(hasher),
        })
    }
}

/// The tokenizer spec of HF tokenizer directory `dir` (see [`HfFiles::in_dir`]).
pub fn tokenizer_spec_from_dir(dir: &Path) -> Result<TokenizerSpec, TextError> {
    Ok(HfFiles::in_dir(dir).load()?.spec)
}

/// The tokenizer spec of `tokenizer_json`, with the chat template (and special tokens) of
/// `template`: a `tokenizer_config.json` or a `.jinja` file.
pub fn tokenizer_spec_from_files(
    tokenizer_json: &Path,
    template: Option<&Path>,
) -> Result<TokenizerSpec, TextError> {
    Ok(HfFiles::from_files(tokenizer_json, template).load()?.spec)
}

fn json_object(path: &Path, bytes: &[u8]) -> Result<Value, TextError> {
    let problem = |problem: String| TextError::File {
        path: path.to_path_buf(),
        problem,
    };
    let v: Value =
        serde_json::from_slice(bytes).map_err(|e| problem(format!("is not valid JSON: {e}")))?;
    if !v.is_object() {
        return Err(problem("is not a JSON object".into()));
    }
    Ok(v)
}

/// Reads the chat template, special tokens and BOS flag of a `tokenizer_config.json`.
fn apply_config(spec: &mut TokenizerSpec, path: &Path, c: &Value) -> Result<(), TextError> {
    let key_error = |key: &str, problem: &str| TextError::MetadataKey {
        file: path.to_path_buf(),
        key: key.to_string(),
        problem: problem.to_string(),
    };
    spec.chat_template =
        chat_template(c.get("chat_template")).map_err(|p| key_error("chat_template", p))?;
    spec.bos_token = token_text(c.get("bos_token")).map_err(|p| key_error("bos_token", p))?;
    spec.eos_token = token_text(c.get("eos_token")).map_err(|p| key_error("eos_token", p))?;
    spec.add_bos = match c.get("add_bos_token") {
        None | Some(Value::Null) => false,
        Some(Value::Bool(b)) => *b,
        Some(_) => return Err(key_error("add_bos_token", "is not a boolean")),
    };
    Ok(())
}

/// `chat_template` is a string, or (older multi-template configs) a list of
/// `{"name", "template"}` of which `transformers` uses the one named `default`.
fn chat_template(v: Option<&Value>) -> Result<Option<String>, &'static str> {
    match v {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s.clone())),
        Some(Value::Array(list)) => {
            for entry in list {
                let name = entry.get("name").and_then(Value::as_str);
                let template = entry.get("template").and_then(Value::as_str);
                match (name, template) {
                    (Some("default"), Some(t)) => return Ok(Some(t.to_string())),
                    (Some(_), Some(_)) => {}
                    _ => return Err("has an entry that is not {\"name\", \"template\"}"),
                }
            }
            Ok(None)
        }
        Some(_) => Err("is not a string or a list of named templates"),
    }
}

/// Token fields are a string or an AddedToken object `{"content": ...}`.
fn token_text(v: Option<&Value>) -> Result<Option<String>, &'static str> {
    match v {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s.clone())),
        Some(Value::Object(o)) => match o.get("content") {
            Some(Value::String(s)) => Ok(Some(s.clone())),
            _ => Err("is an object without a string \"content\""),
        },
        Some(_) => Err("is not a string or an AddedToken object"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn template_lists_give_the_default_entry() {
        let list =
            json!([{"name": "tool_use", "template": "T"}, {"name": "default", "template": "D"}]);
        assert_eq!(chat_template(Some(&list)), Ok(Some("D".into())));
        let none = json!([{"name": "tool_use", "template": "T"}]);
        assert_eq!(chat_template(Some(&none)), Ok(None));
        assert!(chat_template(Some(&json!([1]))).is_err());
        assert!(chat_template(Some(&json!(3))).is_err());
    }

    #[test]
    fn token_fields_are_strings_or_added_tokens() {
        assert_eq!(token_text(Some(&json!("<s>"))), Ok(Some("<s>".into())));
        let added = json!({"content": "</s>", "special": true});
        assert_eq!(token_text(Some(&added)), Ok(Some("</s>".into())));
        assert_eq!(token_text(Some(&Value::Null)), Ok(None));
        assert!(token_text(Some(&json!({"special": true}))).is_err());
        assert!(token_text(Some(&json!(2))).is_err());
    }

    #[test]
    fn a_jinja_template_keeps_the_config_a_json_one_replaces_it() {
        let dir = HfFiles {
            tokenizer: "d/tokenizer.json".into(),
            config: Some("d/tokenizer_config.json".into()),
            template: Some("d/chat_template.jinja".into()),
        };
        let jinja = dir.clone().with_template(Path::new("other.jinja"));
        assert_eq!(jinja.config, dir.config);
        assert_eq!(jinja.template, Some("other.jinja".into()));
        let config = dir.with_template(Path::new("other.json"));
        assert_eq!(config.config, Some("other.json".into()));
        assert_eq!(config.template, None);
    }
}

//! Building a [`TokenizerSpec`] from GGUF `tokenizer.ggml.*` metadata (and the chat
//! template, `tokenizer.chat_template`).

use super::reader::GgufMetadata;
use super::value::Value;
use crate::bytelevel::{bpe_tokenizer_json, smollm_pre_tokenizer};
use crate::error::TextError;
use serde_json::{json, Value as Json};
use std::path::Path;
use warmpath_protocol::tokenizer_spec::TokenizerSpec;

/// llama.cpp token types that are matched as whole special tokens in text.
const TYPE_CONTROL: i64 = 3;
const TYPE_USER_DEFINED: i64 = 4;

/// An error about metadata `key` of `file`.
fn key_error(file: &Path, key: &str, problem: impl Into<String>) -> TextError {
    TextError::MetadataKey {
        file: file.to_path_buf(),
        key: key.to_string(),
        problem: problem.into(),
    }
}

fn strings(g: &GgufMetadata, file: &Path, key: &str) -> Result<Vec<String>, TextError> {
    let arr = match g.get(key) {
        None => return Err(key_error(file, key, "missing")),
        Some(v) => v
            .as_array()
            .ok_or_else(|| key_error(file, key, "is not an array"))?,
    };
    arr.iter()
        .enumerate()
        .map(|(i, v)| {
            v.as_str()
                .map(str::to_string)
                .ok_or_else(|| key_error(file, key, format!("entry {i} is not a string")))
        })
        .collect()
}

/// The pre-tokenizer for llama.cpp's `tokenizer.ggml.pre` name.
fn pre_tokenizer(pre: &str) -> Option<Json> {
    let byte_level = |use_regex: bool| json!({"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": true, "use_regex": use_regex});
    Some(match pre {
        // llama.cpp: "\p{N}" split, then the GPT-2 regex.
        "smollm" | "starcoder" | "refact" | "codeshell" => smollm_pre_tokenizer(),
        "gpt-2" | "gpt2" | "default" => byte_level(true),
        "llama3" | "llama-bpe" | "llama-v3" => json!({"type": "Sequence", "pretokenizers": [
            {"type": "Split", "pattern": {"Regex": "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"},
             "behavior": "Isolated", "invert": false},
            byte_level(false)
        ]}),
        // Qwen2's split: llama 3's with single digits.
        "qwen2" => json!({"type": "Sequence", "pretokenizers": [
            {"type": "Split", "pattern": {"Regex": "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"},
             "behavior": "Isolated", "invert": false},
            byte_level(false)
        ]}),
        _ => return None,
    })
}

/// The tokenizer and chat template that the metadata `g` of GGUF file `file` describe:
/// vocabulary, merges, token types, special ids, BOS handling. Only byte-level BPE
/// (`tokenizer.ggml.model = "gpt2"`) is supported. Errors name `file` and the key.
pub fn tokenizer_spec(g: &GgufMetadata, file: &Path) -> Result<TokenizerSpec, TextError> {
    const MODEL: &str = "tokenizer.ggml.model";
    match g.get(MODEL).map(|v| v.as_str()) {
        None => return Err(key_error(file, MODEL, "missing")),
        Some(Some("gpt2")) => {}
        Some(Some(other)) => {
            return Err(key_error(
                file,
                MODEL,
                format!("is {other:?}: only byte-level BPE \"gpt2\" is supported"),
            ))
        }
        Some(None) => return Err(key_error(file, MODEL, "is not a string")),
    }
    let tokens = strings(g, file, "tokenizer.ggml.tokens")?;
    let merges = strings(g, file, "tokenizer.ggml.merges")?;
    let types: Vec<i64> = g
        .get("tokenizer.ggml.token_type")
        .and_then(Value::as_array)
        .map(|a| a.iter().map(|v| v.as_f64().unwrap_or(1.0) as i64).collect())
        .unwrap_or_default();
    if types.len() > tokens.len() {
        return Err(key_error(
            file,
            "tokenizer.ggml.token_type",
            format!("has {} entries for {} tokens", types.len(), tokens.len()),
        ));
    }
    let added: Vec<(u32, String)> = types
        .iter()
        .enumerate()
        .filter(|(_, &t)| t == TYPE_CONTROL || t == TYPE_USER_DEFINED)
        .map(|(i, _)| (i as u32, tokens[i].clone()))
        .collect();
    const PRE: &str = "tokenizer.ggml.pre";
    let pre = g.get(PRE).and_then(Value::as_str).unwrap_or("default");
    let pre_tokenizer = pre_tokenizer(pre)
        .ok_or_else(|| key_error(file, PRE, format!("is {pre:?}: not supported")))?;
    let id_text = |key: &str| {
        g.get(key)
            .and_then(Value::as_u64)
            .and_then(|i| tokens.get(i as usize).cloned())
    };
    let bos_token = id_text("tokenizer.ggml.bos_token_id");
    let eos_token = id_text("tokenizer.ggml.eos_token_id");
    let mut stop_tokens: Vec<String> =
        ["tokenizer.ggml.eot_token_id", "tokenizer.ggml.eom_token_id"]
            .iter()
            .filter_map(|k| id_text(k))
            .collect();
    // ChatML models end a turn with <|im_end|> even when EOS is <|endoftext|>.
    if tokens.iter().any(|t| t == "<|im_end|>") && !stop_tokens.iter().any(|t| t == "<|im_end|>") {
        stop_tokens.push("<|im_end|>".into());
    }
    let add_bos = g
        .get("tokenizer.ggml.add_bos_token")
        .and_then(Value::as_bool)
        .unwrap_or(false);
    Ok(TokenizerSpec {
        tokenizer: bpe_tokenizer_json(&tokens, &merges, &added, pre_tokenizer),
        chat_template: g
            .get("tokenizer.chat_template")
            .and_then(Value::as_str)
            .map(str::to_string),
        bos_token,
        eos_token,
        stop_tokens,
        add_bos,
    })
}

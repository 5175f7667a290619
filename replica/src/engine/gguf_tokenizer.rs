//! Building a [`TokenizerSpec`] from GGUF `tokenizer.ggml.*` metadata.

use super::gguf::{GgufFile, Value};
use super::EngineError;
use serde_json::{json, Value as Json};
use warmpath_text::bytelevel::{bpe_tokenizer_json, smollm_pre_tokenizer};
use warmpath_text::TokenizerSpec;

/// llama.cpp token types that are matched as whole special tokens in text.
const TYPE_CONTROL: i64 = 3;
const TYPE_USER_DEFINED: i64 = 4;

fn strings(g: &GgufFile, key: &str) -> Result<Vec<String>, EngineError> {
    let arr = g
        .get(key)
        .and_then(Value::as_array)
        .ok_or_else(|| EngineError::InvalidModel(format!("GGUF metadata {key} missing")))?;
    arr.iter()
        .map(|v| {
            v.as_str()
                .map(str::to_string)
                .ok_or_else(|| EngineError::InvalidModel(format!("{key}: non-string entry")))
        })
        .collect()
}

/// The pre-tokenizer for llama.cpp's `tokenizer.ggml.pre` name.
fn pre_tokenizer(pre: &str) -> Result<Json, EngineError> {
    let byte_level = |use_regex: bool| json!({"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": true, "use_regex": use_regex});
    Ok(match pre {
        // llama.cpp: "\p{N}" split, then the GPT-2 regex.
        "smollm" | "starcoder" | "refact" | "codeshell" => smollm_pre_tokenizer(),
        "gpt-2" | "gpt2" | "default" => byte_level(true),
        "llama3" | "llama-bpe" | "llama-v3" => json!({"type": "Sequence", "pretokenizers": [
            {"type": "Split", "pattern": {"Regex": "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"},
             "behavior": "Isolated", "invert": false},
            byte_level(false)
        ]}),
        other => {
            return Err(EngineError::InvalidModel(format!(
                "tokenizer.ggml.pre {other:?} is not supported"
            )))
        }
    })
}

/// Reads the vocabulary, merges, token types and special ids from `g`.
pub(crate) fn tokenizer_spec(g: &GgufFile) -> Result<TokenizerSpec, EngineError> {
    let model = g
        .get("tokenizer.ggml.model")
        .and_then(Value::as_str)
        .unwrap_or("");
    if model != "gpt2" {
        return Err(EngineError::InvalidModel(format!(
            "tokenizer model {model:?} is not supported (byte-level BPE \"gpt2\" only)"
        )));
    }
    let tokens = strings(g, "tokenizer.ggml.tokens")?;
    let merges = strings(g, "tokenizer.ggml.merges")?;
    let types: Vec<i64> = g
        .get("tokenizer.ggml.token_type")
        .and_then(Value::as_array)
        .map(|a| a.iter().map(|v| v.as_f64().unwrap_or(1.0) as i64).collect())
        .unwrap_or_default();
    let added: Vec<(u32, String)> = types
        .iter()
        .enumerate()
        .filter(|(_, &t)| t == TYPE_CONTROL || t == TYPE_USER_DEFINED)
        .map(|(i, _)| (i as u32, tokens[i].clone()))
        .collect();
    let pre = g
        .get("tokenizer.ggml.pre")
        .and_then(Value::as_str)
        .unwrap_or("default");
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
        tokenizer: bpe_tokenizer_json(&tokens, &merges, &added, pre_tokenizer(pre)?),
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

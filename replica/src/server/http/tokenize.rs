//! `POST /tokenize` and `POST /detokenize` in vLLM's shape, with the replica's own
//! tokenizer and chat rendering (the ones generation uses, so a count here is the prompt
//! length a generation request would have):
//! - `{"model","prompt","add_special_tokens"?}` or `{"model","messages",...}` (the chat
//!   fields `/v1/chat/completions` reads: tools, `add_generation_prompt`, ...) ->
//!   `{"count":N,"max_model_len":M,"tokens":[...],"token_strs":null}`;
//! - `{"model","tokens"}` -> `{"prompt":"..."}`.

use super::generate::{check_model, parse};
use crate::server::error::ApiError;
use crate::server::state::AppState;
use axum::body::Bytes;
use axum::extract::State;
use axum::Json;
use serde::{Deserialize, Serialize};
use warmpath_core::TokenId;
use warmpath_text::ChatInput;

/// `POST /tokenize`.
pub const PATH_TOKENIZE: &str = "/tokenize";
/// `POST /detokenize`.
pub const PATH_DETOKENIZE: &str = "/detokenize";

#[derive(Deserialize)]
struct TokenizeRequest {
    model: String,
    #[serde(default)]
    prompt: Option<String>,
    #[serde(default)]
    messages: Option<serde_json::Value>,
    /// For a `prompt`: add the tokenizer's special tokens (BOS), as generation does.
    #[serde(default = "yes")]
    add_special_tokens: bool,
}

fn yes() -> bool {
    true
}

/// The answer of `POST /tokenize`.
#[derive(Debug, Serialize, Deserialize, PartialEq)]
pub struct TokenizeResponse {
    /// Number of tokens.
    pub count: usize,
    /// The model's context window.
    pub max_model_len: usize,
    /// The token ids.
    pub tokens: Vec<u32>,
    /// Always `null` (vLLM fills it only with `return_token_strs`).
    pub token_strs: Option<Vec<String>>,
}

#[derive(Deserialize)]
struct DetokenizeRequest {
    model: String,
    tokens: Vec<u32>,
}

/// The answer of `POST /detokenize`.
#[derive(Debug, Serialize, Deserialize, PartialEq)]
pub struct DetokenizeResponse {
    /// The decoded text.
    pub prompt: String,
}

/// `POST /tokenize`.
pub async fn tokenize(
    State(state): State<AppState>,
    body: Bytes,
) -> Result<Json<TokenizeResponse>, ApiError> {
    let req: TokenizeRequest = parse(&body)?;
    check_model(&state, &req.model)?;
    let tok = &state.facts.tokenizer;
    let tokens = match (&req.prompt, req.messages.as_ref().filter(|m| !m.is_null())) {
        (Some(text), None) => tok.encode(text, req.add_special_tokens),
        (None, Some(_)) => {
            let input = ChatInput::from_body(&body).map_err(|e| ApiError::InvalidParam {
                param: e.param,
                message: e.to_string(),
            })?;
            tok.encode_input(&input)
        }
        _ => {
            return Err(ApiError::InvalidRequest(
                "give either `prompt` or `messages`".into(),
            ))
        }
    }
    .map_err(|e| ApiError::InvalidParam {
        param: if req.prompt.is_some() {
            "prompt"
        } else {
            "messages"
        },
        message: e.to_string(),
    })?;
    Ok(Json(TokenizeResponse {
        count: tokens.len(),
        max_model_len: state.facts.max_context,
        tokens: tokens.iter().map(|t| t.0).collect(),
        token_strs: None,
    }))
}

/// `POST /detokenize`.
pub async fn detokenize(
    State(state): State<AppState>,
    body: Bytes,
) -> Result<Json<DetokenizeResponse>, ApiError> {
    let req: DetokenizeRequest = parse(&body)?;
    check_model(&state, &req.model)?;
    let vocab = state.facts.vocab_size;
    if let Some(bad) = req.tokens.iter().find(|&&t| t as usize >= vocab) {
        return Err(ApiError::InvalidParam {
            param: "tokens",
            message: format!("token id {bad} is outside the vocabulary ({vocab} ids)"),
        });
    }
    let ids: Vec<TokenId> = req.tokens.iter().map(|&t| TokenId(t)).collect();
    let prompt = state
        .facts
        .tokenizer
        .decode(&ids)
        .map_err(|e| ApiError::InvalidParam {
            param: "tokens",
            message: e.to_string(),
        })?;
    Ok(Json(DetokenizeResponse { prompt }))
}

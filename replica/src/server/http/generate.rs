//! `POST /v1/chat/completions` and `POST /v1/completions`: parse, validate, tokenize,
//! submit to the engine loop, answer (JSON or SSE).

use super::job::{Endpoint, Job};
use super::params::sampling_params;
use super::respond;
use super::resume::{resume, Resumed};
use crate::server::error::ApiError;
use crate::server::kv::load::load;
use crate::server::kv::peer::Peer;
use crate::server::kv::trust::now_ms;
use crate::server::state::AppState;
use crate::server::worker::{GenRequest, WorkerMsg};
use axum::body::Bytes;
use axum::extract::State;
use axum::http::HeaderMap;
use axum::http::HeaderValue;
use axum::response::Response;
use serde::de::DeserializeOwned;
use std::time::Duration;
use warmpath_core::{CacheSalt, TokenId};
use warmpath_protocol::continuation::HEADER_STREAM_TOKENS;
use warmpath_protocol::openai::{
    ChatCompletionRequest, CompletionRequest, PromptInput, SamplingFields,
};
use warmpath_protocol::replica_api::{
    HEADER_CACHE_SALT, HEADER_KV_TIER, HEADER_KV_TIER_OFF, HEADER_KV_TIER_TOKENS,
    HEADER_KV_TRANSFER, HEADER_KV_TRANSFERRED_TOKENS, HEADER_KV_TRANSFER_REASON,
    HEADER_PREFILL_FROM,
};
use warmpath_protocol::transfer_auth::HEADER_PREFILL_AUTH;
use warmpath_text::{ChatInput, ChatMessage};

/// Parses a request body; a missing field or a wrong type names the field's path.
pub(crate) fn parse<T: DeserializeOwned>(body: &[u8]) -> Result<T, ApiError> {
    let mut de = serde_json::Deserializer::from_slice(body);
    let value: T = serde_path_to_error::deserialize(&mut de).map_err(|e| {
        let mut path = e.path().to_string();
        if path.is_empty() || path == "." {
            // Serde loses the path inside the flattened sampling fields: find it there.
            if let Some(p) = sampling_field_path(body) {
                path = p;
            }
        }
        ApiError::from_json(e.inner(), &path)
    })?;
    // Trailing characters after the JSON value.
    de.end().map_err(|e| ApiError::from_json(&e, "."))?;
    Ok(value)
}

/// The path of the first sampling field of `body` with a wrong type, if any.
fn sampling_field_path(body: &[u8]) -> Option<String> {
    let v: serde_json::Value = serde_json::from_slice(body).ok()?;
    if !v.is_object() {
        return None;
    }
    match serde_path_to_error::deserialize::<_, SamplingFields>(v) {
        Ok(_) => None,
        Err(e) => Some(e.path().to_string()).filter(|p| !p.is_empty() && p != "."),
    }
}

pub(crate) fn check_model(state: &AppState, model: &str) -> Result<(), ApiError> {
    if model == state.facts.model_name {
        Ok(())
    } else {
        Err(ApiError::ModelNotFound(model.to_string()))
    }
}

/// Whether the gateway turned the shared KV tier off for this request
/// ([`HEADER_KV_TIER_OFF`]: a region-pinned tenant, a tier outside its regions).
pub(crate) fn tier_off(headers: &HeaderMap) -> bool {
    headers
        .get(HEADER_KV_TIER_OFF)
        .is_some_and(|v| v.as_bytes() == b"1")
}

fn salt(headers: &HeaderMap) -> Option<CacheSalt> {
    headers
        .get(HEADER_CACHE_SALT)
        .and_then(|v| v.to_str().ok())
        .filter(|s| !s.is_empty())
        .map(CacheSalt::new)
}

/// Validates, submits to the engine loop and answers as JSON or SSE.
async fn submit(
    state: &AppState,
    headers: &HeaderMap,
    prompt: Vec<TokenId>,
    fields: &SamplingFields,
    endpoint: Endpoint,
    model: String,
) -> Result<Response, ApiError> {
    let pool_tokens = state.info.capacity_blocks as usize * state.block_size;
    let params = sampling_params(fields, prompt.len(), state.facts.max_context, pool_tokens)?;
    let prompt_tokens = prompt.len();
    // A migrated stream's continuation: its tokens are replayed after the prompt (within
    // the limits checked above for the original request), then generation goes on.
    let (decoder, resumed, rng_draws, replay) = match &fields.warmpath_continuation {
        Some(c) => {
            let r = resume(c, &state.facts.tokenizer, state.facts.vocab_size, &params)?;
            (r.decoder, r.resumed, r.rng_draws, r.prior)
        }
        None => (
            state.facts.tokenizer.stream_decoder(),
            Resumed::default(),
            0,
            Vec::new(),
        ),
    };
    let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
    let job = Job {
        endpoint,
        model,
        prompt_tokens,
        stop: params.stop.clone(),
        include_usage: fields
            .stream_options
            .as_ref()
            .is_some_and(|o| o.include_usage),
        decoder,
        rx,
        resume: resumed,
        tag_tokens: headers
            .get(HEADER_STREAM_TOKENS)
            .is_some_and(|v| v.as_bytes() == b"1"),
    };
    let salt = salt(headers);
    let tier_off = tier_off(headers);
    // The shared tier first: what another replica computed is one round trip away. A
    // prefill replica, if named, is asked only for what is still missing. Neither read
    // nor written when the gateway turned it off (data residency).
    let tiered = match &state.tier {
        Some(t) if !tier_off => Some(load(&state.kv, t, &prompt, salt.as_ref()).await),
        _ => None,
    };
    // A role-split pool: the gateway names the prefill replica holding this prompt's KV.
    let transfer = match headers
        .get(HEADER_PREFILL_FROM)
        .and_then(|v| v.to_str().ok())
    {
        Some(from) if state.role.decodes() && !from.is_empty() => {
            let auth = headers
                .get(HEADER_PREFILL_AUTH)
                .and_then(|v| v.to_str().ok());
            match state.trust.may_fetch_from(from, auth, now_ms()) {
                Ok(()) => {
                    let peer = Peer {
                        from,
                        timeout: Duration::from_millis(state.kv_transfer_timeout_ms),
                        trust: &state.trust,
                        tier_off,
                    };
                    Some(load(&state.kv, &peer, &prompt, salt.as_ref()).await)
                }
                Err(e) => {
                    // Not the gateway's request: compute the prompt, fetch nothing.
                    tracing::warn!(from, error = %e, "KV transfer refused: not the gateway's");
                    None
                }
            }
        }
        _ => None,
    };
    let req = GenRequest {
        prompt,
        params,
        salt,
        ignore_eos: fields.ignore_eos.unwrap_or(false),
        reply: tx,
        export: None,
        tier: !tier_off,
        rng_draws,
        replay,
    };
    state
        .submit
        .send(WorkerMsg::Generate(req))
        .map_err(|_| ApiError::Unavailable)?;
    let mut resp = if fields.stream {
        respond::sse(job)
    } else {
        respond::full(job).await?
    };
    if let Some(t) = tiered {
        let h = resp.headers_mut();
        h.insert(HEADER_KV_TIER, HeaderValue::from_static(t.label));
        h.insert(HEADER_KV_TIER_TOKENS, HeaderValue::from(t.tokens));
    }
    if let Some(t) = transfer {
        let h = resp.headers_mut();
        h.insert(HEADER_KV_TRANSFER, HeaderValue::from_static(t.label));
        h.insert(
            HEADER_KV_TRANSFER_REASON,
            HeaderValue::from_static(t.reason),
        );
        h.insert(HEADER_KV_TRANSFERRED_TOKENS, HeaderValue::from(t.tokens));
    }
    Ok(resp)
}

/// `POST /v1/chat/completions`.
pub async fn chat_completions(
    State(state): State<AppState>,
    headers: HeaderMap,
    body: Bytes,
) -> Result<Response, ApiError> {
    let req: ChatCompletionRequest = parse(&body)?;
    check_model(&state, &req.model)?;
    if req.messages.is_empty() {
        return Err(ApiError::InvalidParam {
            param: "messages",
            message: "messages must not be empty".into(),
        });
    }
    let messages: Vec<ChatMessage> = req
        .messages
        .iter()
        .map(|m| {
            ChatMessage::new(
                m.role.clone(),
                m.content.as_ref().map(|c| c.to_text()).unwrap_or_default(),
            )
        })
        .collect();
    // Tools, tool calls, documents, template kwargs: rendered from the whole template
    // input, as the gateway and vLLM render them (`warmpath_text::ChatInput`).
    let encoded = if ChatInput::needed(&body) {
        let input = ChatInput::from_body(&body).map_err(|e| ApiError::InvalidParam {
            param: e.param,
            message: e.to_string(),
        })?;
        state.facts.tokenizer.encode_input(&input)
    } else {
        state.facts.tokenizer.encode_chat(&messages)
    };
    let prompt = encoded.map_err(|e| ApiError::InvalidParam {
        param: "messages",
        message: e.to_string(),
    })?;
    submit(
        &state,
        &headers,
        prompt,
        &req.sampling,
        Endpoint::Chat,
        req.model,
    )
    .await
}

/// `POST /v1/completions`.
pub async fn completions(
    State(state): State<AppState>,
    headers: HeaderMap,
    body: Bytes,
) -> Result<Response, ApiError> {
    let req: CompletionRequest = parse(&body)?;
    check_model(&state, &req.model)?;
    let prompt = match &req.prompt {
        PromptInput::Text(t) => {
            state
                .facts
                .tokenizer
                .encode(t, true)
                .map_err(|e| ApiError::InvalidParam {
                    param: "prompt",
                    message: e.to_string(),
                })?
        }
        PromptInput::Tokens(ids) => {
            if let Some(bad) = ids.iter().find(|&&t| t as usize >= state.facts.vocab_size) {
                return Err(ApiError::InvalidParam {
                    param: "prompt",
                    message: format!(
                        "token id {bad} is outside the vocabulary ({} ids)",
                        state.facts.vocab_size
                    ),
                });
            }
            ids.iter().map(|&t| TokenId(t)).collect()
        }
    };
    submit(
        &state,
        &headers,
        prompt,
        &req.sampling,
        Endpoint::Completion,
        req.model,
    )
    .await
}

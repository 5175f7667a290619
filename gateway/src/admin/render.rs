//! `POST /admin/render` (alias `POST /admin/explain`): what the gateway computes for a
//! request, so a cache miss can be explained. The body is `{"body": REQUEST, "api": ...,
//! "pool": ..., "tenant": ...}`: `REQUEST` a chat, completions, Responses or Messages body
//! (`api`: `chat`, `completions`, `responses`, `messages`; left out, `completions` when the
//! body has a `prompt`, `responses` when it has an `input`, else `chat`). The answer is the
//! prompt as rendered, its token ids, its block hashes (hex) and, per replica that could
//! serve it, the prefix blocks the index says it holds and the cached tokens the gateway
//! would predict there (`x-warmpath-predicted-cached-tokens` of the replica it routes to).
//!
//! The request goes through the data plane's own `prepare` (model check, checkpoint and
//! rollout choice, tokenizer, hash namespace), so what is shown is what routing uses.
//! Nothing is routed, reserved or recorded; a Responses body's `previous_response_id` is
//! not followed (its earlier turns are not added).

use super::error::AdminError;
use crate::api::{messages, responses::request::ResponsesRequest};
use crate::body::request::{self, Endpoint, Prompt};
use crate::encoder::PromptEncoder;
use crate::error::GatewayError;
use crate::proxy::prepare::prepare;
use crate::state::AppState;
use serde::Deserialize;
use serde_json::{json, Value};
use std::time::Instant;
use warmpath_core::text_units;

/// The admin request.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RenderRequest {
    /// The client request to explain.
    body: Value,
    /// Its API.
    #[serde(default)]
    api: Option<String>,
    /// The pool expected to serve it: a 400 when routing would use another.
    #[serde(default)]
    pool: Option<String>,
    /// The tenant whose namespace hashes it (default: the only tenant with auth off).
    #[serde(default)]
    tenant: Option<String>,
}

fn gateway_error(e: GatewayError) -> AdminError {
    match e.status() {
        404 => AdminError::NotFound(e.to_string()),
        503 => AdminError::Unavailable(e.to_string()),
        _ => AdminError::BadRequest(e.to_string()),
    }
}

/// The chat or completions body `req.body` routes as, and its endpoint.
fn routed_body(req: &RenderRequest) -> Result<(&'static str, Endpoint, Vec<u8>), AdminError> {
    let raw = serde_json::to_vec(&req.body).map_err(|e| AdminError::BadRequest(e.to_string()))?;
    let api = match req.api.as_deref() {
        Some(a) => a,
        None if req.body.get("prompt").is_some() => "completions",
        None if req.body.get("input").is_some() => "responses",
        None => "chat",
    };
    Ok(match api {
        "chat" => ("chat", Endpoint::Chat, raw),
        "completions" => ("completions", Endpoint::Completions, raw),
        "messages" => (
            "messages",
            Endpoint::Chat,
            messages::to_chat(&raw).map_err(gateway_error)?.0,
        ),
        "responses" => (
            "responses",
            Endpoint::Chat,
            ResponsesRequest::parse(&raw)
                .map_err(gateway_error)?
                .chat_body(&[]),
        ),
        other => {
            return Err(AdminError::BadRequest(format!(
                "unknown api {other:?}: chat, completions, responses or messages"
            )))
        }
    })
}

/// The prompt's text as the engine sees it: a chat rendered by the checkpoint's template
/// (text units: the bytes that are hashed), a completion's text; `None` for token ids.
fn rendered(
    encoder: &PromptEncoder,
    prompt: &Prompt<'_>,
    body: &[u8],
) -> Result<Option<String>, AdminError> {
    Ok(match (prompt, encoder) {
        (Prompt::Chat(_), PromptEncoder::Tokens(t)) => {
            let input = warmpath_text::ChatInput::from_body(body)
                .map_err(|e| AdminError::BadRequest(e.to_string()))?;
            Some(
                t.inner()
                    .render_input(&input)
                    .map_err(|e| AdminError::BadRequest(format!("cannot render: {e}")))?,
            )
        }
        (Prompt::Chat(msgs), PromptEncoder::TextUnits) => {
            let bytes = text_units::render_chat(msgs.iter().map(|m| {
                (
                    crate::tokenize::ChatText::role(m),
                    crate::tokenize::ChatText::content(m),
                )
            }));
            Some(String::from_utf8_lossy(&bytes).into_owned())
        }
        (Prompt::Text(t), _) => Some(t.to_string()),
        (Prompt::Tokens(_), _) => None,
    })
}

/// Answers a render request.
pub(super) async fn render(state: &AppState, body: &[u8]) -> Result<Value, AdminError> {
    let req: RenderRequest =
        serde_json::from_slice(body).map_err(|e| AdminError::BadRequest(e.to_string()))?;
    let (api, endpoint, routed) = routed_body(&req)?;
    let tenants = state.tenants();
    let tenant = match &req.tenant {
        Some(id) => tenants
            .get(id)
            .cloned()
            .ok_or_else(|| AdminError::NotFound(format!("no tenant {id:?}")))?,
        None => tenants.authenticate_with(None, None).map_err(|_| {
            AdminError::BadRequest(
                "give `tenant`: a request's hashes depend on its tenant's cache salt".into(),
            )
        })?,
    };
    let parsed = request::parse(endpoint, &routed).map_err(gateway_error)?;
    let now = Instant::now();
    let prepared = prepare(state, &tenant, &parsed, now).map_err(gateway_error)?;
    let first = &prepared.replicas[0];
    let pool = first.upstream.pool.clone();
    if let Some(want) = &req.pool {
        if pool.as_deref() != Some(want.as_str()) {
            return Err(AdminError::BadRequest(format!(
                "model {:?} routes to {} here, not to pool {want:?}",
                &*parsed.model,
                pool.as_deref()
                    .map_or("the replicas list".to_string(), |p| format!("pool {p:?}")),
            )));
        }
    }
    let text = rendered(&first.tokenizer, &parsed.prompt, &routed)?;
    let matches = state
        .router
        .match_prefix(&prepared.hashes, state.millis_at(now));
    let bs = prepared.block_size.0;
    let replicas: Vec<Value> = prepared
        .replicas
        .iter()
        .map(|r| {
            let m = matches.get(r.id);
            let blocks = m.blocks().min(prepared.hashes.len() as u32);
            json!({
                "id": r.id.0,
                "replica": r.label,
                "url": r.addr.url(),
                "routable": r.routable(now),
                "precise_blocks": m.precise_blocks,
                "approx_blocks": m.approx_blocks,
                "tier_blocks": m.tier_blocks,
                "matched_blocks": blocks,
                "predicted_cached_tokens": (blocks * bs).min(prepared.prompt_tokens),
            })
        })
        .collect();
    Ok(json!({
        "api": api,
        "model": &*parsed.model,
        "pool": pool,
        "engine": first.upstream.engine.as_str(),
        "tenant": &*tenant.id,
        "checkpoint": prepared.checkpoint,
        "policy": state.router.policy_name(),
        "prompt": text,
        "prompt_tokens": prepared.prompt_tokens,
        "token_ids": prepared.tokens.as_ref().map(|t| t.iter().map(|t| t.0).collect::<Vec<_>>()),
        "block_size": bs,
        "block_hashes": prepared.hashes.iter().map(ToString::to_string).collect::<Vec<_>>(),
        "replicas": replicas,
    }))
}

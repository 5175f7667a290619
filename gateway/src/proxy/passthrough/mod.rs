//! Pass-through APIs: `POST /v1/embeddings`, `POST /tokenize` and `POST /detokenize`
//! (also spelled `/v1/tokenize`, `/v1/detokenize`), forwarded unchanged to a replica of
//! the model that serves the API (its pool's `apis`, `crate::config::apis`), chosen by load
//! alone ([`pick`]). They go through the same phases as a generation request (the
//! tenant's key and limits, an in-flight slot, retries before the first byte, settlement,
//! metrics, the decision log); only [`decide`] differs: no prompt is hashed, and only an
//! embedding's input tokens are reserved (settled from the engine's `usage.prompt_tokens`).

mod body;
mod pick;

use super::admit;
use super::ctx::RequestCtx;
use super::route::{hold_slot, record, Plan, TryOrder};
use crate::body::request::Endpoint;
use crate::body::response::ResponseTracker;
use crate::config::PassthroughApi;
use crate::error::GatewayError;
use crate::state::AppState;
use crate::tenants::Tenant;
use pingora_http::RequestHeader;
use std::sync::Arc;
use std::time::Instant;

/// Everything after the body is read, for a pass-through request: read the model (and an
/// embedding's input), find the replicas serving the API, reserve against the tenant's
/// limits, choose by load, hold a slot, record. On `Ok` the ctx holds the plan and a slot.
pub(crate) async fn decide(
    state: &AppState,
    ctx: &mut RequestCtx,
    tenant: &Arc<Tenant>,
    api: PassthroughApi,
    body: &[u8],
) -> Result<(), GatewayError> {
    let now = Instant::now();
    let req = body::read(api, body)?;
    let model: Arc<str> = Arc::from(req.model.as_str());
    ctx.read.model = model.clone();
    if !tenant.allows(&model) {
        return Err(GatewayError::ModelNotAllowed(req.model));
    }
    let cfg = state.config();
    let replicas = pick::serving(&cfg, &state.registry.all(), &model, api)?;
    let prompt_tokens = match &req.input {
        Some(input) => body::input_tokens(&replicas[0].tokenizer, input)?,
        None => 0,
    };
    admit::reserve(
        state,
        &mut ctx.admission,
        tenant,
        u64::from(prompt_tokens),
        now,
    )
    .await?;
    let t1 = Instant::now();
    let view: Vec<_> = replicas.iter().map(|r| r.snapshot(t1, &model)).collect();
    let decision = pick::by_load(&view, &tenant.residency, tie_breaker(ctx))
        .ok_or_else(|| GatewayError::NoReplica(req.model.clone()))?;
    let order: Vec<_> = std::iter::once(decision.replica)
        .chain(decision.fallbacks.iter().copied())
        .filter_map(|id| replicas.iter().find(|r| r.id == id).cloned())
        .collect();
    let first = order.first().ok_or(GatewayError::NoReplica(req.model))?;
    let decided = Instant::now();
    let plan = Plan {
        endpoint: Endpoint::Passthrough(api),
        model,
        stream: false,
        prompt_tokens,
        hashes: Vec::new(),
        block_size: first.info.block_size,
        checkpoint: first.info.checkpoint.clone(),
        decision: Arc::new(decision),
        prepare: t1.saturating_duration_since(now),
        select: decided.saturating_duration_since(t1),
        decided,
        tokens: None,
        prefill: None,
    };
    let mut order = TryOrder::new(order);
    let who = (&ctx.id.header, ctx.read.api);
    let (slot, hold) =
        hold_slot(state, &mut order, &plan, tenant, (&ctx.admission.flow, who)).await?;
    ctx.admission.hold = Some(hold);
    ctx.admission.flow.queued_ms = plan.decided.elapsed().as_millis() as u64;
    record(
        state,
        &plan,
        tenant,
        &ctx.id.header,
        ctx.read.api,
        &ctx.admission.flow,
    );
    state.retry_budget.record_request(decided);
    ctx.attempts.order = order;
    ctx.attempts.pending = Some(slot);
    ctx.seen.tracker = Some(ResponseTracker::new(false));
    ctx.plan = Some(plan);
    Ok(())
}

/// Statuses with which an engine says it does not serve a path (llama-server without
/// `--embeddings` answers 501).
const NOT_SERVED: [u16; 3] = [404, 405, 501];

/// The error that ends an attempt whose replica answered a pass-through request with
/// [`NOT_SERVED`] (its pool's `apis` lists an API the engine does not serve): the next
/// replica is tried, and the client never gets the engine's 404 ([`not_served_answer`]).
pub(crate) fn not_served(ctx: &RequestCtx, status: u16) -> Option<Box<pingora_error::Error>> {
    let passthrough = matches!(
        ctx.plan.as_ref().map(|p| p.endpoint),
        Some(Endpoint::Passthrough(_))
    );
    (passthrough && NOT_SERVED.contains(&status)).then(|| {
        pingora_error::Error::explain(
            pingora_error::ErrorType::HTTPStatus(status),
            "the replica does not serve this API",
        )
    })
}

/// What the client gets when the last attempt ended in [`not_served`]: 400 naming the
/// model, the API and the engine's status.
pub(crate) fn not_served_answer(
    ctx: &RequestCtx,
    e: &pingora_error::Error,
) -> Option<GatewayError> {
    let plan = ctx.plan.as_ref()?;
    let Endpoint::Passthrough(api) = plan.endpoint else {
        return None;
    };
    match e.etype() {
        pingora_error::ErrorType::HTTPStatus(s) if NOT_SERVED.contains(s) => {
            Some(GatewayError::ApiNotServed {
                model: plan.model.to_string(),
                api: api.as_str(),
                why: format!(
                    "its replica answered {s} for {} (check the pool's `apis`)",
                    api.upstream_path()
                ),
            })
        }
        _ => None,
    }
}

/// Counts a pass-through request that was routed in
/// `passthrough_requests_total{api, status}` (nothing for any other request).
pub(crate) fn count(state: &AppState, ctx: &RequestCtx, status: u16) {
    if let Some(Endpoint::Passthrough(api)) = ctx.plan.as_ref().map(|p| p.endpoint) {
        let status = status.to_string();
        state
            .metrics
            .passthrough_requests
            .with_label_values(&[api.as_str(), status.as_str()])
            .inc();
    }
}

/// Rotates ties between equally loaded replicas: the request id's first 64 bits (a random
/// trace id, or the caller's).
fn tie_breaker(ctx: &RequestCtx) -> u64 {
    let id = ctx.id.text();
    id.get(..16)
        .and_then(|h| u64::from_str_radix(h, 16).ok())
        .unwrap_or(0)
}

/// Sends a pass-through request to the path the engines serve it on (`/v1/tokenize` is
/// `/tokenize` upstream); any other request keeps its path.
pub(crate) fn upstream_path(upstream: &mut RequestHeader, endpoint: Endpoint) {
    if let Endpoint::Passthrough(api) = endpoint {
        let path = api.upstream_path();
        if upstream.uri.path() != path {
            upstream.set_uri(http::Uri::from_static(path));
        }
    }
}

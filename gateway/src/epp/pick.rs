//! One pick: a request's body (as Envoy handed it over) through the gateway's own decision
//! path: parse, tenant (API key), tokenize and hash (`proxy::prepare`), tenant limits
//! (`proxy::admit::reserve`), the subset hint, the policy (`proxy::route`), an in-flight
//! slot, and the decision recorded in the routing history and the decision log exactly as
//! the gateway records its own.

use super::wire::Destination;
use crate::body::request::{self, Endpoint};
use crate::error::GatewayError;
use crate::flow::request::FlowRequest;
use crate::proxy::admit;
use crate::proxy::ctx::Admission;
use crate::proxy::prepare::prepare;
use crate::proxy::route::{hold_slot, record, route};
use crate::replicas::{Replica, Slot};
use crate::state::AppState;
use crate::tenants::limits::Permit;
use crate::tenants::Tenant;
use crate::tokenize::gate::off_loop;
use std::sync::Arc;
use std::time::Instant;

/// What the data plane said about a request before its body.
#[derive(Debug, Default)]
pub(crate) struct Head {
    /// `:path`.
    pub path: String,
    /// `authorization`.
    pub authorization: Option<Vec<u8>>,
    /// `x-request-id` (Envoy sets one), else one made here.
    pub request_id: Option<http::HeaderValue>,
    /// The subset hint (`None`: the whole pool).
    pub subset: Option<Vec<String>>,
    /// The flow-control headers the request carries (`x-priority`, `x-slo-ttft-ms`).
    pub flow: http::HeaderMap,
}

/// A request routed: what to answer Envoy and what to settle when the response is done.
#[derive(Debug)]
pub(crate) struct Picked {
    /// The answer.
    pub destination: Destination,
    /// The tenant.
    pub tenant: Arc<Tenant>,
    /// The tenant's token reservation.
    pub permit: Option<Permit>,
    /// The in-flight slot on the primary endpoint: held, never read; dropping the pick
    /// (when its stream ends) releases it.
    pub _slot: Slot,
    /// Its place among the requests in flight (flow control's reserve): held like the slot.
    pub _hold: crate::flow::gate::Hold,
    /// Every replica of the answer, in order (to find the one that served).
    pub replicas: Vec<Arc<Replica>>,
    /// Model asked for.
    pub model: Arc<str>,
    /// SSE requested.
    pub stream: bool,
    /// Prompt tokens as the replica will count them.
    pub prompt_tokens: u32,
    /// Cached tokens predicted per replica of the answer (same order as `replicas`).
    pub predicted: Vec<u32>,
    /// Headers for the client's response (`x-ratelimit-*`), as the gateway sends them.
    pub rate_headers: Vec<(String, String)>,
}

/// The API a path names: completions for `/v1/completions`, else a chat (Envoy sends the
/// EPP only the pool's inference routes).
fn endpoint_of(path: &str) -> Endpoint {
    let path = path.split('?').next().unwrap_or_default();
    if path.ends_with("/completions") && !path.ends_with("/chat/completions") {
        Endpoint::Completions
    } else {
        Endpoint::Chat
    }
}

/// Picks the endpoints for a request whose whole body is `body`.
pub(crate) async fn pick(
    state: &AppState,
    head: &Head,
    body: &[u8],
) -> Result<Picked, GatewayError> {
    let cfg = state.config();
    let mut admission = Admission::default();
    let tenant = admit::authenticate(state, &mut admission, head.authorization.as_deref())?;
    admission.flow = FlowRequest::classify(&tenant, &head.flow)?;
    let endpoint = endpoint_of(&head.path);
    // A long body is parsed and tokenized off the event loop, as the gateway does.
    let long = state.long_prompts.enter(body.len()).await;
    let parsed = off_loop(long.is_some(), || request::parse(endpoint, body))?;
    let model: Arc<str> = Arc::from(&*parsed.model);
    let now = Instant::now();
    let mut prepared = off_loop(long.is_some(), || prepare(state, &tenant, &parsed, now))?;
    drop(long);
    if let Some(subset) = &head.subset {
        prepared
            .replicas
            .retain(|r| subset.iter().any(|e| *e == r.addr.authority()));
        if prepared.replicas.is_empty() {
            return Err(GatewayError::NoReplica(format!(
                "{} (none of the subset hint's {} endpoints serves it)",
                parsed.model,
                subset.len()
            )));
        }
    }
    let default_max_tokens = cfg.limits.default_max_tokens;
    let max_tokens = u64::from(parsed.max_tokens.unwrap_or(default_max_tokens));
    let tokens = u64::from(prepared.prompt_tokens) + max_tokens * u64::from(parsed.n);
    admit::reserve(state, &mut admission, &tenant, tokens, now).await?;
    // The body Envoy forwards: bounded where the client set no completion bound (the
    // replica must stop where the reservation does), salted for an engine that takes
    // vLLM's `cache_salt`: the gateway's own rules.
    let mut forward = parsed
        .max_tokens
        .is_none()
        .then(|| crate::proxy::bound::bounded_body(body, endpoint, default_max_tokens))
        .flatten();
    if prepared
        .replicas
        .first()
        .is_some_and(|r| r.upstream.namespace.salt)
    {
        let kept = forward.as_deref().unwrap_or(body);
        if let Some(salted) = crate::proxy::salt::salted_body(kept, &tenant.salt) {
            forward = Some(salted);
        }
    }
    let (plan, mut order) = route(state, &tenant, prepared, endpoint, &parsed, model.clone())?;
    let request_id = head
        .request_id
        .clone()
        .unwrap_or_else(|| http::HeaderValue::from_static("epp"));
    let who = (&request_id, "");
    let (slot, hold) = hold_slot(state, &mut order, &plan, &tenant, (&admission.flow, who)).await?;
    admission.flow.queued_ms = plan.decided.elapsed().as_millis() as u64;
    let now = state.millis_at(Instant::now());
    state
        .router
        .record_routed(slot.replica().id, &plan.hashes, now);
    record(state, &plan, &tenant, &request_id, "", &admission.flow);
    let replicas: Vec<Arc<Replica>> = std::iter::once(slot.replica().clone())
        .chain(order.untried().iter().cloned())
        .collect();
    let predicted: Vec<u32> = replicas
        .iter()
        .map(|r| plan.predicted_cached_tokens(r))
        .collect();
    let rate_headers = admission
        .rate_headers
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_str().unwrap_or_default().to_string()))
        .collect();
    Ok(Picked {
        destination: Destination {
            endpoints: replicas.iter().map(|r| r.addr.authority()).collect(),
            // As the gateway stamps a request (`proxy::send::stamp_request`): the tenant's
            // salt replaces whatever the client sent (its blocks are hashed under it), and
            // credentials and the headers only the gateway may send do not reach the engine.
            set: vec![(
                crate::headers::CACHE_SALT.to_string(),
                tenant.salt_header.as_bytes().to_vec(),
            )],
            remove: crate::proxy::send::CREDENTIALS
                .iter()
                .map(|h| (*h).to_string())
                .chain(
                    [
                        crate::headers::PREFILL_FROM,
                        crate::headers::PREFILL_AUTH,
                        crate::headers::KV_TIER_OFF,
                        crate::headers::STREAM_TOKENS,
                    ]
                    .iter()
                    .map(ToString::to_string),
                )
                .collect(),
            body: forward,
        },
        tenant,
        permit: admission.permit,
        _slot: slot,
        _hold: hold,
        replicas,
        model,
        stream: plan.stream,
        prompt_tokens: plan.prompt_tokens,
        predicted,
        rate_headers,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_name_their_api() {
        assert_eq!(endpoint_of("/v1/completions"), Endpoint::Completions);
        assert_eq!(endpoint_of("/v1/completions?x=1"), Endpoint::Completions);
        assert_eq!(endpoint_of("/v1/chat/completions"), Endpoint::Chat);
        assert_eq!(endpoint_of(""), Endpoint::Chat);
    }
}

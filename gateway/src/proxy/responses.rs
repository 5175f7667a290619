//! The Responses API's hooks into the request's phases (`crate::api::responses` does the
//! translating): the body read becomes its chat equivalent ([`open`]); a follow-up goes to
//! the replica that served the response it continues, while that replica is routable
//! ([`pin`]); the replica's answer is translated back as it passes ([`upstream_header`],
//! [`body`]), and a complete answer is kept for the next follow-up.

use super::ctx::RequestCtx;
use super::route::{Plan, TryOrder};
use crate::api::responses::Exchange;
use crate::error::GatewayError;
use crate::state::AppState;
use bytes::Bytes;
use pingora_http::ResponseHeader;
use std::sync::Arc;
use std::time::Instant;

/// Opens the request's [`Exchange`]; returns the chat body that takes its place.
pub(crate) async fn open(
    state: &AppState,
    ctx: &mut RequestCtx,
    body: &[u8],
) -> Result<Bytes, GatewayError> {
    let tenant = ctx.admission.tenant.as_ref().map_or("", |t| &*t.id);
    let (x, chat) = Exchange::open(tenant, body, &state.responses, state.fleet.as_ref()).await?;
    ctx.responses = Some(Box::new(x));
    Ok(chat)
}

/// A follow-up's routing: the replica that served the previous response first (the
/// decision, as logged, names it), when it serves the plan's checkpoint and is routable;
/// else the policy's choice stands.
pub(crate) fn pin(state: &AppState, ctx: &RequestCtx, plan: &mut Plan, order: &mut TryOrder) {
    let Some(url) = ctx.responses.as_ref().and_then(|x| x.pin()) else {
        return;
    };
    let now = Instant::now();
    let Some(r) =
        state.registry.all().into_iter().find(|r| {
            r.info.checkpoint == plan.checkpoint && r.routable(now) && r.addr.url() == url
        })
    else {
        return;
    };
    if plan.decision.replica == r.id {
        return;
    }
    if let Some(d) = Arc::get_mut(&mut plan.decision) {
        let chosen = d.replica;
        d.fallbacks.retain(|f| *f != r.id);
        d.fallbacks.insert(0, chosen);
        d.replica = r.id;
        d.predicted_cached_blocks = d
            .explanation
            .candidate(r.id)
            .map_or(0, |c| c.matched_blocks);
    }
    order.prefer(r);
}

/// The replica's response header: a translated answer changes length, so it goes out
/// chunked.
pub(crate) fn upstream_header(ctx: &mut RequestCtx, resp: &mut ResponseHeader) {
    if !ctx.seen.started {
        return;
    }
    let status = resp.status.as_u16();
    if let Some(x) = ctx.responses.as_deref_mut() {
        if x.on_status(status) {
            resp.remove_header(&http::header::CONTENT_LENGTH);
        }
    }
}

/// One body chunk, translated; at the end of a complete answer, its record is kept.
pub(crate) fn body(state: &AppState, ctx: &mut RequestCtx, body: &mut Option<Bytes>, end: bool) {
    let Some(x) = ctx.responses.as_deref_mut() else {
        return;
    };
    x.on_body(body, end);
    if !end {
        return;
    }
    let Some(replica) = ctx.attempts.replica.as_ref() else {
        return;
    };
    if let Some((id, record)) = x.record(replica.addr.url()) {
        state
            .responses
            .put(x.tenant(), &id, record, state.fleet.as_ref());
    }
}

//! Read the response: the replica's status decides between a retry (429 and 502-504,
//! while one is allowed) and passing it on ([`upstream_status`]), and a 429 or 503 with
//! `Retry-After` cools that replica down for as long ([`MAX_COOLDOWN`] at most); the
//! client's header gets the gateway's headers ([`stamp_response`]); the body is watched as it streams through,
//! never delayed, and a stream that ends without `[DONE]` gets a terminal error event
//! ([`watch_body`]).

use super::ctx::RequestCtx;
use super::migrate;
use crate::error::GatewayError;
use crate::headers;
use crate::state::AppState;
use bytes::Bytes;
use http::HeaderValue;
use pingora_error::{Error, ErrorType, Result};
use pingora_http::ResponseHeader;
use std::time::Duration;
use warmpath_protocol::replica_api::KV_TRANSFER_REASON_IMPORT;

/// The longest cooldown a replica's `Retry-After` can impose: a bound on what one answer
/// (a bug, or a replica gone wrong) can take out of rotation.
pub(crate) const MAX_COOLDOWN: Duration = Duration::from_secs(60);

/// The replica's status: a 429 or 503 with `Retry-After` (seconds) cools the replica down
/// (no request is routed there before it passes); a retryable status (429, 502-504)
/// becomes an error Pingora retries on another replica while a retry is allowed; anything
/// else, or no retry left, starts the response.
pub(crate) fn upstream_status(
    state: &AppState,
    resp: &ResponseHeader,
    ctx: &mut RequestCtx,
) -> Result<()> {
    let status = resp.status.as_u16();
    if let Some(slot) = &ctx.attempts.slot {
        slot.prefill_done();
    }
    transfer_outcome(state, resp, ctx);
    ctx.seen.tier_tokens = resp
        .headers
        .get(headers::KV_TIER_TOKENS)
        .and_then(|v| v.to_str().ok())
        .and_then(|s| s.parse().ok());
    if matches!(status, 429 | 503) {
        let wait = resp
            .headers
            .get(http::header::RETRY_AFTER)
            .and_then(|v| v.to_str().ok())
            .and_then(|s| s.trim().parse::<u64>().ok())
            .map(|s| Duration::from_secs(s).min(MAX_COOLDOWN));
        if let (Some(wait), Some(slot)) = (wait, &ctx.attempts.slot) {
            slot.replica()
                .health
                .lock()
                .cool_down(std::time::Instant::now(), wait);
            ctx.attempts.upstream_retry_after = ctx.attempts.upstream_retry_after.max(Some(wait));
        }
    }
    if ctx.migration.as_ref().is_some_and(|m| m.continuing) {
        // A continuation: its header is not the client's (that went out with the first
        // stream); anything but a 200 is this replica failing the stream too.
        if status != 200 {
            return Err(Error::explain(
                ErrorType::HTTPStatus(status),
                "the continuation was refused",
            ));
        }
        return Ok(());
    }
    let max_attempts = state.config().retry.max_attempts;
    if matches!(status, 429 | 502 | 503 | 504) && ctx.can_retry(max_attempts) {
        let label = if status == 429 {
            "upstream_429"
        } else {
            "upstream_5xx"
        };
        state.metrics.retries.with_label_values(&[label]).inc();
        let mut e = Error::explain(ErrorType::HTTPStatus(status), "retryable upstream status");
        e.set_retry(true);
        return Err(e);
    }
    if let Some(e) = super::passthrough::not_served(ctx, status) {
        return Err(e);
    }
    ctx.seen.started = true;
    ctx.seen.status = status;
    if status != 200 {
        // Not a stream of events: nothing to continue.
        ctx.migration = None;
    }
    Ok(())
}

/// A split request's KV transfer, as the decode replica reports it: counted per prefill
/// replica, and held against the prefill replica's health ([`prefill_health`]).
fn transfer_outcome(state: &AppState, resp: &ResponseHeader, ctx: &RequestCtx) {
    let Some(prefill) = ctx.plan.as_ref().and_then(|p| p.prefill.as_ref()) else {
        return;
    };
    let Some(outcome) = resp
        .headers
        .get(headers::KV_TRANSFER)
        .and_then(|v| v.to_str().ok())
    else {
        return;
    };
    let outcome = match outcome {
        "ok" => "ok",
        "partial" => "partial",
        "failed" => "failed",
        "skipped" => "skipped",
        _ => "unknown",
    };
    state
        .metrics
        .disagg
        .transfers
        .with_label_values(&[prefill.label.as_str(), outcome])
        .inc();
    let reason = resp
        .headers
        .get(headers::KV_TRANSFER_REASON)
        .and_then(|v| v.to_str().ok());
    if let Some(ok) = prefill_health(outcome, reason) {
        state.report(prefill, ok);
    }
}

/// What a transfer's outcome says about the prefill replica's health: `ok` is a success, and
/// `failed` (nothing arrived) a failure, unless the decode replica's own pool could not take
/// the blocks (reason `import`): that is no fault of the prefill replica.
fn prefill_health(outcome: &str, reason: Option<&str>) -> Option<bool> {
    match (outcome, reason) {
        ("ok", _) => Some(true),
        (_, Some(KV_TRANSFER_REASON_IMPORT)) => None,
        ("failed", _) => Some(false),
        _ => None,
    }
}

/// The gateway's headers on the client's response: the replica, the predicted cached
/// tokens (each when configured), the rate-limit headers and the request id.
pub(crate) fn stamp_response(state: &AppState, resp: &mut ResponseHeader, ctx: &RequestCtx) {
    let cfg = state.config();
    let h = headers::caseless_response(resp);
    h.reserve(ctx.admission.rate_headers.len() + 3);
    if let (Some(plan), Some(slot)) = (&ctx.plan, &ctx.attempts.slot) {
        if cfg.headers.replica {
            h.insert(headers::REPLICA, slot.replica().label_header.clone());
        }
        if cfg.headers.predicted_cached_tokens {
            let n = plan.predicted_cached_tokens(slot.replica());
            h.insert(headers::PREDICTED_CACHED, HeaderValue::from(u64::from(n)));
        }
    }
    for (k, v) in &ctx.admission.rate_headers {
        h.insert(k.clone(), v.clone());
    }
    if matches!(ctx.seen.status, 429 | 503) && !h.contains_key(http::header::RETRY_AFTER) {
        // The replica's pushback passed on: the client is told when to come back.
        let secs = ctx
            .attempts
            .upstream_retry_after
            .map_or(1, |d| d.as_secs().max(1));
        h.insert(http::header::RETRY_AFTER, HeaderValue::from(secs));
    }
    h.insert(headers::REQUEST_ID, ctx.id.header.clone());
    if ctx.messages.is_some() && h.remove(http::header::CONTENT_LENGTH).is_some() {
        // Translated (`crate::api::messages`): another length than the replica's.
        h.insert(
            http::header::TRANSFER_ENCODING,
            HeaderValue::from_static("chunked"),
        );
    }
}

/// Watches one body chunk; at the end of a stream without `[DONE]` (or with an error
/// event), appends the terminal error event.
pub(crate) fn watch_body(
    state: &AppState,
    body: &mut Option<Bytes>,
    end_of_stream: bool,
    ctx: &mut RequestCtx,
) -> Result<()> {
    if let Some(m) = ctx.migration.as_deref_mut() {
        if let Some(b) = body.as_ref() {
            *body = Some(m.pass(b));
        }
        let t = &m.transcript;
        // A stream the replica broke off (an error event, an end without `[DONE]`) fails
        // like a reset: it may continue elsewhere (`super::migrate::on_failure`).
        if t.error_event {
            return Err(migrate::body_failure("the replica sent an error event"));
        }
        if end_of_stream && ctx.seen.started && !t.ended {
            return Err(migrate::body_failure("the replica ended the stream early"));
        }
    }
    if let (Some(t), Some(b)) = (ctx.seen.tracker.as_mut(), body.as_ref()) {
        t.observe(b);
    }
    if end_of_stream && ctx.is_stream() && ctx.seen.started && !ctx.seen.stream_error_sent {
        let done = ctx
            .seen
            .tracker
            .as_ref()
            .is_some_and(|t| t.saw_done() && !t.saw_error());
        if !done {
            // The replica ended the stream without [DONE]: finish with an error event.
            let ev =
                GatewayError::Upstream("the replica ended the stream early".into()).to_sse_event();
            let mut out = body.take().map(|b| b.to_vec()).unwrap_or_default();
            out.extend_from_slice(&ev);
            *body = Some(Bytes::from(out));
            ctx.seen.stream_error_sent = true;
            state
                .metrics
                .stream_errors
                .with_label_values(&["truncated"])
                .inc();
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::prefill_health;

    #[test]
    fn a_full_decode_pool_is_not_held_against_the_prefill_replica() {
        assert_eq!(prefill_health("ok", Some("complete")), Some(true));
        assert_eq!(prefill_health("ok", None), Some(true));
        assert_eq!(prefill_health("failed", Some("connect")), Some(false));
        assert_eq!(prefill_health("failed", Some("corrupt")), Some(false));
        // A replica of an older build names no reason.
        assert_eq!(prefill_health("failed", None), Some(false));
        // The blocks came, the decode replica had no room for them.
        assert_eq!(prefill_health("failed", Some("import")), None);
        assert_eq!(prefill_health("partial", Some("import")), None);
        assert_eq!(prefill_health("partial", Some("truncated")), None);
        assert_eq!(prefill_health("skipped", None), None);
    }
}

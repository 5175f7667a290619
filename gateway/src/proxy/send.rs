//! Send upstream: each attempt's replica and connection options ([`peer`]): the slot the
//! request phase held, or for a retry, once the retry budget allows and the backoff has
//! passed, the next replica in the try order with room; then the headers the replica gets
//! ([`stamp_request`]).

use super::ctx::RequestCtx;
use super::migrate;
use super::upstream;
use crate::config::EngineKind;
use crate::headers;
use crate::retry::backoff;
use crate::state::AppState;
use http::HeaderValue;
use pingora_core::upstreams::peer::HttpPeer;
use pingora_error::{Error, ErrorType, Result};
use pingora_http::RequestHeader;
use std::time::{Duration, Instant};

fn internal(msg: &'static str) -> Box<Error> {
    Error::explain(ErrorType::InternalError, msg)
}

/// The peer of the next attempt, holding its slot in the ctx.
pub(crate) async fn peer(state: &AppState, ctx: &mut RequestCtx) -> Result<Box<HttpPeer>> {
    let cfg = state.config();
    let slot = match ctx.attempts.pending.take() {
        Some(s) => s,
        None => {
            // A retry: budget, backoff, then the next replica with room.
            let now = Instant::now();
            if !state.retry_budget.try_retry(
                now,
                cfg.retry.budget_ratio,
                cfg.retry.budget_floor_per_s,
            ) {
                state.metrics.retry_budget_exhausted.inc();
                return Err(Error::explain(
                    ErrorType::HTTPStatus(503),
                    "retry budget exhausted",
                ));
            }
            // A replica's `Retry-After` cooled that replica down (`super::response`); the
            // retry goes to another one, after the usual backoff only.
            let wait = backoff(
                ctx.attempts.count,
                Duration::from_millis(cfg.retry.backoff_base_ms),
                Duration::from_millis(cfg.retry.backoff_max_ms),
                None,
            );
            tokio::time::sleep(wait).await;
            if ctx.plan.is_none() {
                return Err(internal("no routing plan"));
            }
            let max = cfg.admission.max_in_flight_per_replica;
            ctx.attempts
                .order
                .next_replica(&state.registry, max, Instant::now())
                .ok_or_else(|| {
                    Error::explain(ErrorType::HTTPStatus(503), "no replica left to retry on")
                })?
        }
    };
    ctx.attempts.count += 1;
    let r = slot.replica().clone();
    ctx.attempts.replica = Some(r.clone());
    ctx.attempts.slot = Some(slot);
    let mut peer = match r.socket_addr {
        Some(addr) => HttpPeer::new(addr, false, String::new()),
        None => HttpPeer::new(r.addr.authority(), false, String::new()),
    };
    upstream::mark(&mut peer);
    let connect = Duration::from_millis(cfg.timeouts.connect_ms);
    peer.options.connection_timeout = Some(connect);
    peer.options.total_connection_timeout = Some(connect);
    // Streams: the idle bound applies to every read (first token included); plain
    // responses arrive whole, so their bound is the first-token (= response) deadline.
    let read = if ctx.is_stream() {
        cfg.timeouts.idle_ms
    } else {
        cfg.timeouts.first_token_ms
    };
    peer.options.read_timeout = Some(Duration::from_millis(read));
    peer.options.write_timeout = Some(Duration::from_millis(cfg.timeouts.idle_ms));
    Ok(Box::new(peer))
}

/// Client credentials the replica never sees: the gateway's own key, a proxy's, the
/// dashboard's session cookie, and the key headers other APIs use (a client pointed at
/// Warmpath may still send its provider key under them).
pub(crate) const CREDENTIALS: [&str; 5] = [
    "authorization",
    "proxy-authorization",
    "cookie",
    "x-api-key",
    "api-key",
];

/// Removes from a client's request header what must not reach a replica: its credentials,
/// and the headers only the gateway sets (a prefill replica's name and signature: a
/// client's value would make a replica fetch from an address of the client's choosing; the
/// tier switch, set by the residency rule; the token stream switch). One pass over the
/// names the client sent, then a removal only for those present (usually just
/// `authorization`), instead of a lookup per name.
fn strip(h: &mut http::HeaderMap) {
    fn stripped(name: &http::HeaderName) -> bool {
        let n = name.as_str();
        CREDENTIALS.contains(&n)
            || n == headers::PREFILL_FROM.as_str()
            || n == headers::PREFILL_AUTH.as_str()
            || n == headers::KV_TIER_OFF.as_str()
            || n == headers::STREAM_TOKENS.as_str()
    }
    while let Some(name) = h.keys().find(|n| stripped(n)).cloned() {
        h.remove(&name);
    }
}

/// The request header as the replica gets it: no client credentials, the tenant's cache
/// salt, the trace and request id, the replica's `Host`, and a chunked body (read whole)
/// framed by its length. Records the prefix as routed there (the approximate index).
pub(crate) fn stamp_request(
    state: &AppState,
    upstream: &mut RequestHeader,
    ctx: &RequestCtx,
) -> Result<()> {
    let tenant = ctx
        .admission
        .tenant
        .as_ref()
        .ok_or_else(|| internal("no tenant"))?;
    if ctx.messages.is_some() {
        // Sent to the replica as the chat it was translated to.
        upstream.set_uri(http::Uri::from_static(crate::api::messages::UPSTREAM_PATH));
    } else if ctx.responses.is_some() {
        // A Responses request goes upstream as its chat equivalent.
        upstream.set_uri(http::Uri::from_static("/v1/chat/completions"));
    } else if let Some(plan) = &ctx.plan {
        super::passthrough::upstream_path(upstream, plan.endpoint);
    }
    if let Some(path) = ctx.migration.as_ref().and_then(|m| m.upstream_path()) {
        // A chat continued by token ids (`migrate::completions`).
        upstream.set_uri(http::Uri::from_static(path));
    }
    let h = headers::caseless_request(upstream);
    strip(h);
    if let Some(b) = &ctx.read.upstream_body {
        // The body the gateway kept (the client's, or with the completion bound:
        // `super::bound`), read whole: framed by its own length, sent in one piece.
        h.remove(http::header::TRANSFER_ENCODING);
        h.insert(http::header::CONTENT_LENGTH, HeaderValue::from(b.len()));
    }
    // Inserting replaces whatever the client sent under this name.
    h.insert(headers::CACHE_SALT, tenant.salt_header.clone());
    h.insert(headers::TRACEPARENT, ctx.trace.header_value());
    h.insert(headers::REQUEST_ID, ctx.id.header.clone());
    if let (Some(plan), Some(slot)) = (&ctx.plan, &ctx.attempts.slot) {
        let r = slot.replica();
        h.insert(http::header::HOST, r.host_header.clone());
        if let Some(m) = &ctx.migration {
            let exact = migrate::continues_exactly(r.upstream.engine);
            if m.continuing && !exact && !m.transcript.tokens.is_empty() {
                // Only a Warmpath replica reads the tokens a continuation carries.
                return Err(internal("a continuation needs a Warmpath replica"));
            }
            if exact {
                h.insert(headers::STREAM_TOKENS, HeaderValue::from_static("1"));
            }
        }
        // Warmpath's replica reports its queue exactly: only other engines need the
        // gateway's own count (`crate::replicas::pending`), so the default path pays nothing.
        if r.upstream.engine != EngineKind::Warmpath {
            let predicted = u64::from(plan.predicted_cached_tokens(r));
            let cached = r.cache_truth.expected(predicted);
            slot.prefill_sent(u64::from(plan.prompt_tokens).saturating_sub(cached));
        }
        let now = Instant::now();
        let split = plan
            .prefill
            .as_ref()
            .filter(|p| {
                p.id != r.id && r.info.role.decodes() && r.upstream.engine == EngineKind::Warmpath
            })
            .and_then(|p| Some((p, HeaderValue::from_str(&p.addr.url()).ok()?)));
        // The replica that computes the prompt is recorded as holding it. In a split that is
        // the prefill replica: the decode replica holds the prompt only once its import is
        // done, and its own `Stored` events say so. Crediting it now would send a request
        // arriving meanwhile with the same prefix there unsplit, to prefill it whole.
        let computes = split.as_ref().map_or(r.id, |(p, _)| p.id);
        if ctx.attempts.count > 1 || ctx.attempts.recorded != Some(computes) {
            // (The first attempt to the replica `decide` recorded is in the history already:
            // a long prompt's record is a walk over its blocks.)
            state
                .router
                .record_routed(computes, &plan.hashes, state.millis_at(now));
        }
        let prefill = split.as_ref().map(|(p, _)| p.as_ref());
        crate::residency::stamp_tier(h, &tenant.residency, r, prefill);
        if let Some((_, from)) = split {
            // Decode replicas with the transfer key fetch only from a name the gateway signed.
            if let Some(key) = &state.config().kv_transfer_key {
                let sig = warmpath_protocol::transfer_auth::sign(
                    key.0.as_bytes(),
                    warmpath_protocol::transfer_auth::Purpose::PrefillFrom,
                    from.to_str().unwrap_or(""),
                    crate::rollout::model::now_ms(),
                );
                if let Ok(v) = HeaderValue::from_str(&sig) {
                    h.insert(headers::PREFILL_AUTH, v);
                }
            }
            h.insert(headers::PREFILL_FROM, from);
        }
        // An engine without KV events is known only by where requests went: tell the fleet.
        if let Some(fleet) = &state.fleet {
            if r.upstream.engine != EngineKind::Warmpath && r.upstream.kv_events.is_none() {
                fleet.share_route(|| r.addr.url(), &plan.hashes);
            }
        }
        if ctx.attempts.count == 1 {
            let m = &state.metrics;
            let latency = match ctx.messages {
                Some(_) => &m.added_latency_messages,
                None => m.added_latency_for(plan.endpoint),
            };
            latency.observe(now.saturating_duration_since(ctx.start).as_secs_f64());
        }
    }
    Ok(())
}

/// The request body as the replica gets it, on every attempt: the body the gateway kept
/// ([`super::ctx::Read::upstream_body`]: the client's, or with the completion bound), in
/// place of the first piece Pingora hands over (its retry buffer's copy, or, for a body
/// past that buffer's 64 KiB, `None` at the end of the body: `vendor/README.md`); any later
/// piece of the same attempt is dropped.
pub(crate) fn body(ctx: &mut RequestCtx, data: &mut Option<bytes::Bytes>) {
    let Some(b) = &ctx.read.upstream_body else {
        return;
    };
    if ctx.read.upstream_sent == ctx.attempts.count {
        if data.is_some() {
            *data = Some(bytes::Bytes::new());
        }
    } else {
        ctx.read.upstream_sent = ctx.attempts.count;
        *data = Some(b.clone());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strip_removes_every_credential_and_gateway_header_in_any_number() {
        let mut h = http::HeaderMap::new();
        h.insert("content-type", HeaderValue::from_static("application/json"));
        h.append("authorization", HeaderValue::from_static("Bearer a"));
        h.append("authorization", HeaderValue::from_static("Bearer b"));
        h.insert("x-api-key", HeaderValue::from_static("k"));
        h.insert("cookie", HeaderValue::from_static("s=1"));
        h.insert(
            headers::PREFILL_FROM,
            HeaderValue::from_static("http://evil"),
        );
        h.insert(headers::PREFILL_AUTH, HeaderValue::from_static("sig"));
        h.insert(headers::KV_TIER_OFF, HeaderValue::from_static("1"));
        h.insert(headers::STREAM_TOKENS, HeaderValue::from_static("1"));
        h.insert("user-agent", HeaderValue::from_static("t"));
        strip(&mut h);
        let mut left: Vec<&str> = h.keys().map(|k| k.as_str()).collect();
        left.sort_unstable();
        assert_eq!(left, ["content-type", "user-agent"]);
        // Nothing to strip: nothing changes.
        strip(&mut h);
        assert_eq!(h.len(), 2);
    }
}

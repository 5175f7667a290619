//! Failures after the request phase: a connect that failed, an error while proxying, and
//! what the client gets when no attempt is left ([`answer`]). Decides what is retried,
//! what counts against a replica's health, and what is nobody's fault but the client's.

use super::ctx::RequestCtx;
use super::migrate;
use super::respond;
use crate::error::GatewayError;
use crate::state::AppState;
use bytes::Bytes;
use pingora_error::{Error, ErrorSource, ErrorType};
use pingora_proxy::Session;
use std::time::Duration;

/// A connect failed: the replica's fault; retried on the next replica if one is allowed.
pub(crate) fn connect_failed(
    state: &AppState,
    ctx: &mut RequestCtx,
    mut e: Box<Error>,
) -> Box<Error> {
    if let Some(slot) = ctx.attempts.slot.take() {
        state.report(slot.replica(), false);
    }
    let retry = ctx.can_retry(state.config().retry.max_attempts);
    if retry {
        state.metrics.retries.with_label_values(&["connect"]).inc();
    }
    e.set_retry(retry);
    e
}

/// An error while proxying: a stale pooled connection is retried once on the same replica;
/// an upstream error counts against the replica and is retried elsewhere while allowed.
pub(crate) fn proxy_failed(
    state: &AppState,
    ctx: &mut RequestCtx,
    e: Box<Error>,
    client_reused: bool,
) -> Box<Error> {
    let e = if ctx.seen.started && ctx.is_stream() {
        // A stream under way: it may continue on another replica.
        match migrate::on_failure(state, ctx, e) {
            Ok(e) => return e,
            Err(e) => e,
        }
    } else {
        e
    };
    let mut e = e;
    let upstream_status = matches!(e.etype(), ErrorType::HTTPStatus(_));
    if stale_pooled(&e, client_reused) && !ctx.seen.started && !ctx.attempts.stale_retried {
        // A pooled connection the replica had already closed: retry the same replica
        // once on a fresh connection; not a fault, not a budgeted retry.
        ctx.attempts.stale_retried = true;
        ctx.attempts.pending = ctx.attempts.slot.take();
        e.set_retry(ctx.attempts.pending.is_some());
        return e;
    }
    let upstream_fault = e.esource() == &ErrorSource::Upstream;
    if upstream_fault && !upstream_status && !ctx.seen.started {
        ctx.attempts.unanswered += 1;
    }
    if let Some(slot) = ctx.attempts.slot.take() {
        // An upstream error or a 502-504 counts against the replica's health (a replica
        // that fails every request but passes the probe is ejected all the same); a 429
        // is the replica pushing back (its cooldown is in its `Retry-After`), and a client
        // that went away is not the replica's fault.
        let failed = match e.etype() {
            ErrorType::HTTPStatus(s) => matches!(s, 502..=504),
            _ => upstream_fault,
        };
        if failed {
            state.report(slot.replica(), false);
        }
    }
    let retry =
        ctx.can_retry(state.config().retry.max_attempts) && (upstream_status || upstream_fault);
    if retry && !upstream_status {
        state
            .metrics
            .retries
            .with_label_values(&["upstream_error"])
            .inc();
    }
    e.set_retry(retry);
    e
}

/// No attempt left: a stream under way ends with an error event; a client still waiting
/// gets the error as OpenAI JSON; a client that left gets nothing. Returns the status sent
/// (0 when none).
pub(crate) async fn answer(
    state: &AppState,
    session: &mut Session,
    e: &Error,
    ctx: &mut RequestCtx,
) -> u16 {
    if client_gone(e) {
        // Nobody to write to (and a client that stopped reading would only hold the slot
        // for another `timeouts.client_write_ms`).
        return 0;
    }
    let err = super::passthrough::not_served_answer(ctx, e)
        .unwrap_or_else(|| classify(e, ctx.attempts.upstream_retry_after));
    if ctx.seen.started {
        if ctx.is_stream() && !ctx.seen.stream_error_sent {
            ctx.seen.stream_error_sent = true;
            state
                .metrics
                .stream_errors
                .with_label_values(&[err.code()])
                .inc();
            // The replica's own error event, when one was held back for a migration that
            // did not happen; else the gateway's.
            let ev = ctx
                .migration
                .as_mut()
                .and_then(|m| m.transcript.take_held_error())
                .unwrap_or_else(|| Bytes::from(err.to_sse_event()));
            let ev = match ctx.messages.as_deref_mut() {
                Some(m) => m.stream_error(&ev),
                None => ev,
            };
            if session.as_downstream().response_written().is_none() {
                // The stream failed in the same read as its header (an error event held
                // back for a migration that did not happen): Pingora never wrote that
                // header, so the client gets one before the event, not a bare body.
                let _ = session.write_response_header(sse_header(), false).await;
            }
            let _ = session.write_response_body(Some(ev), true).await;
        }
        return 0;
    }
    ctx.seen.status = err.status();
    ctx.seen.error_code = Some(err.code());
    let _ = respond::error(
        session,
        &err,
        respond::error_body(ctx, &err),
        &ctx.admission.rate_headers,
        &ctx.id.header,
        true,
    )
    .await;
    err.status()
}

/// The header of a stream whose replica's header never reached the client.
fn sse_header() -> Box<pingora_http::ResponseHeader> {
    let mut h = pingora_http::ResponseHeader::build(200, Some(3)).expect("a valid status");
    let _ = h.insert_header("content-type", "text/event-stream");
    let _ = h.insert_header("cache-control", "no-cache");
    let _ = h.insert_header("transfer-encoding", "chunked");
    Box::new(h)
}

/// The client's connection failed or closed, or the client stopped reading (a write made
/// no progress for `timeouts.client_write_ms`): nobody is left to answer.
pub(crate) fn client_gone(e: &Error) -> bool {
    client_side(e)
        && matches!(
            e.etype(),
            ErrorType::WriteError
                | ErrorType::ReadError
                | ErrorType::ConnectionClosed
                | ErrorType::WriteTimedout
        )
}

/// The error arose on the client's side of the proxy (its connection gone, or anything
/// else it did): never held against a replica's health.
pub(crate) fn client_side(e: &Error) -> bool {
    e.esource() == &ErrorSource::Downstream
}

/// A pooled upstream connection the replica had already closed: an upstream transport error
/// on a reused connection. A client that went away meanwhile is not one (nothing would be
/// there to read a retried answer).
fn stale_pooled(e: &Error, client_reused: bool) -> bool {
    client_reused
        && e.esource() == &ErrorSource::Upstream
        && !matches!(e.etype(), ErrorType::HTTPStatus(_))
}

/// Maps a Pingora error to the gateway's error; an overload tells the client to come
/// back after the longest `Retry-After` a replica gave (`upstream_retry_after`), 1 s at
/// least.
fn classify(e: &Error, upstream_retry_after: Option<Duration>) -> GatewayError {
    let retry_after = upstream_retry_after
        .unwrap_or(Duration::ZERO)
        .max(Duration::from_secs(1));
    match e.etype() {
        ErrorType::ConnectTimedout | ErrorType::ReadTimedout | ErrorType::WriteTimedout => {
            GatewayError::UpstreamTimeout
        }
        ErrorType::HTTPStatus(429 | 503) => GatewayError::Overloaded { retry_after },
        _ => GatewayError::Upstream(e.etype().as_str().to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_an_upstream_error_on_a_reused_connection_is_a_stale_pooled_connection() {
        let closed = || Error::new(ErrorType::ConnectionClosed);
        assert!(stale_pooled(&closed().into_up(), true));
        assert!(
            !stale_pooled(&closed().into_up(), false),
            "a fresh connection"
        );
        assert!(
            !stale_pooled(&closed().into_down(), true),
            "the client went away: no second attempt upstream"
        );
        assert!(!stale_pooled(
            &Error::new(ErrorType::HTTPStatus(503)).into_up(),
            true
        ));
    }

    #[test]
    fn a_client_is_gone_only_when_its_own_connection_failed() {
        for t in [
            ErrorType::ConnectionClosed,
            ErrorType::ReadError,
            ErrorType::WriteError,
            ErrorType::WriteTimedout,
        ] {
            assert!(client_gone(&Error::new(t.clone()).into_down()), "{t:?}");
            assert!(!client_gone(&Error::new(t).into_up()), "the replica's side");
        }
        assert!(!client_gone(
            &Error::new(ErrorType::ReadTimedout).into_down()
        ));
    }
}

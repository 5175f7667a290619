//! The gateway as one Pingora `ProxyHttp`: the request phase ([`crate::intake`]) decides
//! everything before Pingora connects upstream; the later phases pick the attempt's
//! replica, stamp headers, watch the response and account for it.

use crate::deadline::DeadlineStream;
use crate::error::GatewayError;
use crate::headers;
use crate::intake::{self, Intake};
use crate::limits::Permit;
use crate::plan::Plan;
use crate::replicas::Slot;
use crate::response::ResponseTracker;
use crate::retry::backoff;
use crate::state::AppState;
use crate::tenants::Tenant;
use crate::trace::{RequestId, TraceContext};
use async_trait::async_trait;
use bytes::Bytes;
use http::HeaderValue;
use pingora_core::upstreams::peer::HttpPeer;
use pingora_error::{Error, ErrorType, Result};
use pingora_http::{RequestHeader, ResponseHeader};
use pingora_proxy::{FailToProxy, ProxyHttp, Session};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The proxy service.
pub struct Gateway {
    state: Arc<AppState>,
}

impl Gateway {
    /// A proxy over `state`.
    pub fn new(state: Arc<AppState>) -> Self {
        Self { state }
    }
}

/// Per-request state across phases.
pub struct RequestCtx {
    /// Request id (the W3C trace id), as text and header value.
    pub request_id: RequestId,
    /// Trace context propagated upstream.
    pub trace: TraceContext,
    /// Arrival time.
    pub start: Instant,
    /// Authenticated tenant.
    pub tenant: Option<Arc<Tenant>>,
    /// Model asked for.
    pub model: Arc<str>,
    /// Token reservation.
    pub permit: Option<Permit>,
    /// `x-ratelimit-*` headers.
    pub rate_headers: crate::headers::HeaderPairs,
    /// The routing plan.
    pub plan: Option<Plan>,
    /// Slot held from admission for the first attempt.
    pub pending_slot: Option<Slot>,
    /// Slot of the current attempt.
    pub slot: Option<Slot>,
    /// Next plan candidate for a retry.
    pub next_candidate: usize,
    /// Attempts made.
    pub attempts: u32,
    /// The response header went downstream: no more retries.
    pub response_started: bool,
    /// Final status.
    pub status: u16,
    /// Error code label when the gateway answered with an error.
    pub error_code: Option<&'static str>,
    /// Response observer.
    pub tracker: Option<ResponseTracker>,
    /// Upstream Retry-After to honour on the next attempt.
    pub upstream_retry_after: Option<Duration>,
    /// The stream got its terminal error event.
    pub stream_error_sent: bool,
    /// The whole request body was read: its length (at most `limits.max_body_bytes`).
    pub body_len: Option<u32>,
    /// Replica of the latest attempt.
    pub replica: Option<Arc<crate::replicas::Replica>>,
    /// A stale pooled connection was already retried.
    pub stale_retried: bool,
    /// A gateway control endpoint (`/health`, `/ready`): not API traffic, so kept out of
    /// request metrics, logs and the dashboard.
    pub control: bool,
}

/// The model of a request not parsed (yet): one shared empty string, not one per request.
fn no_model() -> Arc<str> {
    static EMPTY: std::sync::OnceLock<Arc<str>> = std::sync::OnceLock::new();
    EMPTY.get_or_init(|| "".into()).clone()
}

impl RequestCtx {
    /// A fresh context with a new root trace.
    pub fn new() -> Self {
        let trace = TraceContext::new_root();
        Self {
            request_id: trace.request_id(),
            trace,
            start: Instant::now(),
            tenant: None,
            model: no_model(),
            permit: None,
            rate_headers: Vec::new(),
            plan: None,
            pending_slot: None,
            slot: None,
            next_candidate: 1,
            attempts: 0,
            response_started: false,
            status: 0,
            error_code: None,
            tracker: None,
            upstream_retry_after: None,
            stream_error_sent: false,
            body_len: None,
            replica: None,
            stale_retried: false,
            control: false,
        }
    }

    /// The label of the latest attempt's replica; empty before any attempt.
    pub fn replica_label(&self) -> &str {
        self.replica.as_ref().map_or("", |r| r.label.as_str())
    }

    fn is_stream(&self) -> bool {
        self.plan.as_ref().is_some_and(|p| p.stream)
    }

    fn can_retry(&self, max_attempts: u32) -> bool {
        !self.response_started
            && self.attempts < max_attempts
            && self
                .plan
                .as_ref()
                .is_some_and(|p| self.next_candidate < p.candidates.len())
    }
}

impl Default for RequestCtx {
    fn default() -> Self {
        Self::new()
    }
}

fn internal(msg: &'static str) -> Box<Error> {
    Error::explain(ErrorType::InternalError, msg)
}

#[async_trait]
impl ProxyHttp for Gateway {
    type CTX = RequestCtx;

    fn new_ctx(&self) -> RequestCtx {
        RequestCtx::new()
    }

    /// No downstream modules. Pingora's default adds its response-compression module,
    /// disabled; the gateway never compresses (replies are small JSON or SSE that must
    /// flush event by event), so it does not pay for that module's per-request setup and
    /// filter calls.
    fn init_downstream_modules(&self, _modules: &mut pingora_core::modules::http::HttpModules) {}

    async fn request_filter(&self, session: &mut Session, ctx: &mut RequestCtx) -> Result<bool> {
        if let Some(d) = DeadlineStream::of(session) {
            d.header_read();
        }
        if let Some(tp) = session
            .req_header()
            .headers
            .get(headers::TRACEPARENT)
            .and_then(|v| v.to_str().ok())
        {
            if let Some(t) = TraceContext::child_of(tp) {
                ctx.request_id = t.request_id();
                ctx.trace = t;
            }
        }
        match intake::run(&self.state, session, ctx).await? {
            Intake::Forward => Ok(false),
            Intake::Answered(status) => {
                ctx.status = status;
                Ok(true)
            }
        }
    }

    async fn upstream_peer(
        &self,
        _session: &mut Session,
        ctx: &mut RequestCtx,
    ) -> Result<Box<HttpPeer>> {
        let cfg = self.state.config();
        let slot = match ctx.pending_slot.take() {
            Some(s) => s,
            None => {
                // A retry: budget, backoff, then the next candidate with room.
                let now = Instant::now();
                if !self.state.retry_budget.try_retry(
                    now,
                    cfg.retry.budget_ratio,
                    cfg.retry.budget_floor_per_s,
                ) {
                    self.state.metrics.retry_budget_exhausted.inc();
                    return Err(Error::explain(
                        ErrorType::HTTPStatus(503),
                        "retry budget exhausted",
                    ));
                }
                let wait = backoff(
                    ctx.attempts,
                    Duration::from_millis(cfg.retry.backoff_base_ms),
                    Duration::from_millis(cfg.retry.backoff_max_ms),
                    ctx.upstream_retry_after.take(),
                );
                tokio::time::sleep(wait).await;
                let plan = ctx
                    .plan
                    .as_ref()
                    .ok_or_else(|| internal("no routing plan"))?;
                let mut found = None;
                while ctx.next_candidate < plan.candidates.len() {
                    let r = &plan.candidates[ctx.next_candidate];
                    ctx.next_candidate += 1;
                    if !r.health.lock().routable(Instant::now()) {
                        continue;
                    }
                    if let Some(s) = self
                        .state
                        .registry
                        .try_acquire(r, cfg.admission.max_in_flight_per_replica)
                    {
                        found = Some(s);
                        break;
                    }
                }
                found.ok_or_else(|| {
                    Error::explain(ErrorType::HTTPStatus(503), "no replica left to retry on")
                })?
            }
        };
        ctx.attempts += 1;
        let r = slot.replica().clone();
        ctx.replica = Some(r.clone());
        ctx.slot = Some(slot);
        let mut peer = match r.socket_addr {
            Some(addr) => HttpPeer::new(addr, false, String::new()),
            None => HttpPeer::new(r.addr.authority(), false, String::new()),
        };
        crate::upstream::mark(&mut peer);
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

    async fn upstream_request_filter(
        &self,
        _session: &mut Session,
        upstream: &mut RequestHeader,
        ctx: &mut RequestCtx,
    ) -> Result<()> {
        let tenant = ctx.tenant.as_ref().ok_or_else(|| internal("no tenant"))?;
        let h = headers::caseless_request(upstream);
        h.remove(http::header::AUTHORIZATION);
        if let Some(len) = ctx.body_len {
            if h.remove(http::header::TRANSFER_ENCODING).is_some() {
                // A chunked body was read whole: the replica gets it framed by its length,
                // and in one send with the header (`crate::upstream`).
                h.insert(http::header::CONTENT_LENGTH, HeaderValue::from(len));
            }
        }
        // Inserting replaces whatever the client sent under this name.
        h.insert(headers::CACHE_SALT, tenant.salt_header.clone());
        h.insert(headers::TRACEPARENT, ctx.trace.header_value());
        h.insert(headers::REQUEST_ID, ctx.request_id.header.clone());
        if let (Some(plan), Some(slot)) = (&ctx.plan, &ctx.slot) {
            h.insert(http::header::HOST, slot.replica().host_header.clone());
            let now = Instant::now();
            self.state.router.record_routed(
                slot.replica().id,
                &plan.hashes,
                self.state.millis_at(now),
            );
            if ctx.attempts == 1 {
                self.state
                    .metrics
                    .added_latency_for(plan.endpoint)
                    .observe(now.saturating_duration_since(ctx.start).as_secs_f64());
            }
        }
        Ok(())
    }

    async fn upstream_response_filter(
        &self,
        _session: &mut Session,
        resp: &mut ResponseHeader,
        ctx: &mut RequestCtx,
    ) -> Result<()> {
        let status = resp.status.as_u16();
        let max_attempts = self.state.config().retry.max_attempts;
        if matches!(status, 429 | 502 | 503 | 504) && ctx.can_retry(max_attempts) {
            ctx.upstream_retry_after = resp
                .headers
                .get("retry-after")
                .and_then(|v| v.to_str().ok())
                .and_then(|s| s.trim().parse::<u64>().ok())
                .map(Duration::from_secs);
            let label = if status == 429 {
                "upstream_429"
            } else {
                "upstream_5xx"
            };
            self.state.metrics.retries.with_label_values(&[label]).inc();
            let mut e = Error::explain(ErrorType::HTTPStatus(status), "retryable upstream status");
            e.set_retry(true);
            return Err(e);
        }
        ctx.response_started = true;
        ctx.status = status;
        Ok(())
    }

    async fn response_filter(
        &self,
        _session: &mut Session,
        resp: &mut ResponseHeader,
        ctx: &mut RequestCtx,
    ) -> Result<()> {
        let cfg = self.state.config();
        let h = headers::caseless_response(resp);
        h.reserve(ctx.rate_headers.len() + 3);
        if let (Some(plan), Some(slot)) = (&ctx.plan, &ctx.slot) {
            if cfg.headers.replica {
                h.insert(headers::REPLICA, slot.replica().label_header.clone());
            }
            if cfg.headers.predicted_cached_tokens {
                let n = plan.predicted_cached_tokens(slot.replica());
                h.insert(headers::PREDICTED_CACHED, HeaderValue::from(u64::from(n)));
            }
        }
        for (k, v) in &ctx.rate_headers {
            h.insert(k.clone(), v.clone());
        }
        h.insert(headers::REQUEST_ID, ctx.request_id.header.clone());
        Ok(())
    }

    fn response_body_filter(
        &self,
        _session: &mut Session,
        body: &mut Option<Bytes>,
        end_of_stream: bool,
        ctx: &mut RequestCtx,
    ) -> Result<Option<Duration>> {
        if let (Some(t), Some(b)) = (ctx.tracker.as_mut(), body.as_ref()) {
            t.observe(b);
        }
        let stream = ctx.is_stream();
        if end_of_stream && stream && ctx.response_started && !ctx.stream_error_sent {
            let done = ctx
                .tracker
                .as_ref()
                .is_some_and(|t| t.saw_done() && !t.saw_error());
            if !done {
                // The replica ended the stream without [DONE]: finish with an error event.
                let ev = GatewayError::Upstream("the replica ended the stream early".into())
                    .to_sse_event();
                let mut out = body.take().map(|b| b.to_vec()).unwrap_or_default();
                out.extend_from_slice(&ev);
                *body = Some(Bytes::from(out));
                ctx.stream_error_sent = true;
                self.state
                    .metrics
                    .stream_errors
                    .with_label_values(&["truncated"])
                    .inc();
            }
        }
        Ok(None)
    }

    fn fail_to_connect(
        &self,
        _session: &mut Session,
        _peer: &HttpPeer,
        ctx: &mut RequestCtx,
        mut e: Box<Error>,
    ) -> Box<Error> {
        if let Some(slot) = ctx.slot.take() {
            self.state.report(slot.replica(), false);
        }
        let retry = ctx.can_retry(self.state.config().retry.max_attempts);
        if retry {
            self.state
                .metrics
                .retries
                .with_label_values(&["connect"])
                .inc();
        }
        e.set_retry(retry);
        e
    }

    fn error_while_proxy(
        &self,
        _peer: &HttpPeer,
        _session: &mut Session,
        mut e: Box<Error>,
        ctx: &mut RequestCtx,
        client_reused: bool,
    ) -> Box<Error> {
        let upstream_status = matches!(e.etype(), ErrorType::HTTPStatus(_));
        if stale_pooled(&e, client_reused) && !ctx.response_started && !ctx.stale_retried {
            // A pooled connection the replica had already closed: retry the same replica
            // once on a fresh connection; not a fault, not a budgeted retry.
            ctx.stale_retried = true;
            ctx.pending_slot = ctx.slot.take();
            e.set_retry(ctx.pending_slot.is_some());
            return e;
        }
        let upstream_fault = e.esource() == &pingora_error::ErrorSource::Upstream;
        if let Some(slot) = ctx.slot.take() {
            // A retryable status is the replica pushing back, and a client that went away
            // is not the replica's fault: only upstream errors count against its health.
            if upstream_fault && !upstream_status {
                self.state.report(slot.replica(), false);
            }
        }
        let retry = ctx.can_retry(self.state.config().retry.max_attempts)
            && (upstream_status || upstream_fault);
        if retry && !upstream_status {
            self.state
                .metrics
                .retries
                .with_label_values(&["upstream_error"])
                .inc();
        }
        e.set_retry(retry);
        e
    }

    async fn fail_to_proxy(
        &self,
        session: &mut Session,
        e: &Error,
        ctx: &mut RequestCtx,
    ) -> FailToProxy {
        let err = classify(e);
        if ctx.response_started {
            if ctx.is_stream() && !ctx.stream_error_sent {
                ctx.stream_error_sent = true;
                self.state
                    .metrics
                    .stream_errors
                    .with_label_values(&[err.code()])
                    .inc();
                let _ = session
                    .write_response_body(Some(Bytes::from(err.to_sse_event())), true)
                    .await;
            }
            return FailToProxy {
                error_code: 0,
                can_reuse_downstream: false,
            };
        }
        if client_gone(e) {
            return FailToProxy {
                error_code: 0,
                can_reuse_downstream: false,
            };
        }
        ctx.status = err.status();
        ctx.error_code = Some(err.code());
        let _ = crate::respond::error(
            session,
            &err,
            &ctx.rate_headers,
            &ctx.request_id.header,
            true,
        )
        .await;
        FailToProxy {
            error_code: err.status(),
            can_reuse_downstream: false,
        }
    }

    /// A client that went away is ordinary traffic, already in the `request` line (status
    /// 499 and the error); Pingora would log an ERROR line for each.
    fn suppress_error_log(&self, _session: &Session, _ctx: &RequestCtx, e: &Error) -> bool {
        client_gone(e)
    }

    async fn logging(&self, session: &mut Session, e: Option<&Error>, ctx: &mut RequestCtx) {
        if let Some(d) = DeadlineStream::of(session) {
            d.expect_next_request();
        }
        crate::accounting::finish(&self.state, e, ctx);
    }
}

/// The client's connection failed or closed: nobody is left to answer.
fn client_gone(e: &Error) -> bool {
    e.esource() == &pingora_error::ErrorSource::Downstream
        && matches!(
            e.etype(),
            ErrorType::WriteError | ErrorType::ReadError | ErrorType::ConnectionClosed
        )
}

/// A pooled upstream connection the replica had already closed: an upstream transport error
/// on a reused connection. A client that went away meanwhile is not one (nothing would be
/// there to read a retried answer).
fn stale_pooled(e: &Error, client_reused: bool) -> bool {
    client_reused
        && e.esource() == &pingora_error::ErrorSource::Upstream
        && !matches!(e.etype(), ErrorType::HTTPStatus(_))
}

/// Maps a Pingora error to the gateway's error.
fn classify(e: &Error) -> GatewayError {
    match e.etype() {
        ErrorType::ConnectTimedout | ErrorType::ReadTimedout | ErrorType::WriteTimedout => {
            GatewayError::UpstreamTimeout
        }
        ErrorType::HTTPStatus(503) => GatewayError::Overloaded {
            retry_after: Duration::from_secs(1),
        },
        ErrorType::HTTPStatus(429) => GatewayError::Overloaded {
            retry_after: Duration::from_secs(1),
        },
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
        ] {
            assert!(client_gone(&Error::new(t.clone()).into_down()), "{t:?}");
            assert!(!client_gone(&Error::new(t).into_up()), "the replica's side");
        }
        assert!(!client_gone(
            &Error::new(ErrorType::ReadTimedout).into_down()
        ));
    }
}

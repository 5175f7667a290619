//! The gateway as one Pingora `ProxyHttp`. Each hook is thin: it calls the phase that owns
//! the work, in the order Pingora runs them (the request phase decides everything before
//! Pingora connects upstream).

use super::accept::deadline::DeadlineStream;
use super::ctx::RequestCtx;
use super::request::{self, Verdict};
use super::{failure, finish, response, send};
use crate::headers;
use crate::state::AppState;
use crate::trace::TraceContext;
use async_trait::async_trait;
use bytes::Bytes;
use pingora_core::upstreams::peer::HttpPeer;
use pingora_error::{Error, Result};
use pingora_http::{RequestHeader, ResponseHeader};
use pingora_proxy::{FailToProxy, ProxyHttp, Session};
use std::sync::Arc;
use std::time::Duration;

/// The proxy service.
pub(crate) struct Gateway {
    state: Arc<AppState>,
}

impl Gateway {
    /// A proxy over `state`.
    pub(crate) fn new(state: Arc<AppState>) -> Self {
        Self { state }
    }
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

    /// The request phase ([`request::run`]): read, authenticate, prepare, admit, route.
    async fn request_filter(&self, session: &mut Session, ctx: &mut RequestCtx) -> Result<bool> {
        if let Some(d) = DeadlineStream::of(session) {
            d.header_read();
        }
        // A client that stops reading holds its replica slot only this long: a write that
        // makes no progress fails, which ends the request and closes the upstream
        // connection (the replica cancels the generation).
        session.set_write_timeout(Some(Duration::from_millis(
            self.state.config().timeouts.client_write_ms,
        )));
        if let Some(t) = session
            .req_header()
            .headers
            .get(headers::TRACEPARENT)
            .and_then(|v| v.to_str().ok())
            .and_then(TraceContext::child_of)
        {
            ctx.continue_trace(t);
        }
        match request::run(&self.state, session, ctx).await? {
            Verdict::Forward => {
                if let Some(d) = DeadlineStream::of(session) {
                    d.body_read();
                }
                Ok(false)
            }
            Verdict::Answered(status) => {
                ctx.seen.status = status;
                Ok(true)
            }
        }
    }

    /// The body the replica gets ([`send::body`]).
    async fn request_body_filter(
        &self,
        _session: &mut Session,
        body: &mut Option<Bytes>,
        _end_of_stream: bool,
        ctx: &mut RequestCtx,
    ) -> Result<()> {
        send::body(ctx, body);
        Ok(())
    }

    /// Each attempt's replica ([`send::peer`]).
    async fn upstream_peer(
        &self,
        _session: &mut Session,
        ctx: &mut RequestCtx,
    ) -> Result<Box<HttpPeer>> {
        send::peer(&self.state, ctx).await
    }

    /// The header the replica gets ([`send::stamp_request`]).
    async fn upstream_request_filter(
        &self,
        _session: &mut Session,
        upstream: &mut RequestHeader,
        ctx: &mut RequestCtx,
    ) -> Result<()> {
        send::stamp_request(&self.state, upstream, ctx)
    }

    /// Retry or start the response ([`response::upstream_status`]).
    async fn upstream_response_filter(
        &self,
        _session: &mut Session,
        resp: &mut ResponseHeader,
        ctx: &mut RequestCtx,
    ) -> Result<()> {
        response::upstream_status(&self.state, resp, ctx)?;
        super::responses::upstream_header(ctx, resp);
        Ok(())
    }

    /// The header the client gets ([`response::stamp_response`]).
    async fn response_filter(
        &self,
        _session: &mut Session,
        resp: &mut ResponseHeader,
        ctx: &mut RequestCtx,
    ) -> Result<()> {
        response::stamp_response(&self.state, resp, ctx);
        Ok(())
    }

    /// Each body chunk ([`response::watch_body`]).
    fn response_body_filter(
        &self,
        _session: &mut Session,
        body: &mut Option<Bytes>,
        end_of_stream: bool,
        ctx: &mut RequestCtx,
    ) -> Result<Option<Duration>> {
        response::watch_body(&self.state, body, end_of_stream, ctx)?;
        if ctx.seen.status < 400 && body.as_ref().is_some_and(|b| !b.is_empty()) {
            if let Some(t) = &ctx.admission.tenant {
                ctx.admission
                    .flow
                    .first_byte(&self.state.metrics, &t.id, ctx.start);
            }
        }
        if let Some(m) = ctx.messages.as_deref_mut() {
            m.body(ctx.seen.status, body, end_of_stream);
        }
        super::responses::body(&self.state, ctx, body, end_of_stream);
        Ok(None)
    }

    fn fail_to_connect(
        &self,
        _session: &mut Session,
        _peer: &HttpPeer,
        ctx: &mut RequestCtx,
        e: Box<Error>,
    ) -> Box<Error> {
        failure::connect_failed(&self.state, ctx, e)
    }

    fn error_while_proxy(
        &self,
        _peer: &HttpPeer,
        _session: &mut Session,
        e: Box<Error>,
        ctx: &mut RequestCtx,
        client_reused: bool,
    ) -> Box<Error> {
        failure::proxy_failed(&self.state, ctx, e, client_reused)
    }

    async fn fail_to_proxy(
        &self,
        session: &mut Session,
        e: &Error,
        ctx: &mut RequestCtx,
    ) -> FailToProxy {
        FailToProxy {
            error_code: failure::answer(&self.state, session, e, ctx).await,
            can_reuse_downstream: false,
        }
    }

    /// A client that went away is ordinary traffic, already in the `request` line (status
    /// 499 and the error); Pingora would log an ERROR line for each.
    fn suppress_error_log(&self, _session: &Session, _ctx: &RequestCtx, e: &Error) -> bool {
        failure::client_gone(e)
    }

    /// The end of every request, whatever happened ([`finish::finish`]).
    async fn logging(&self, session: &mut Session, e: Option<&Error>, ctx: &mut RequestCtx) {
        if let Some(d) = DeadlineStream::of(session) {
            d.expect_next_request();
        }
        finish::finish(&self.state, e, ctx);
    }
}

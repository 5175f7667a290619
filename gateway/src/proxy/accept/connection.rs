//! One accepted client connection, from the accept to its last request: the connection
//! caps ([`super::conn_cap`]), the header deadline and size bounds ([`super::deadline`],
//! [`super::head`]), then Pingora's
//! HTTP/1.1 session loop over the proxy.
//!
//! The proxy is built with the upstream connector of [`crate::proxy::upstream`], and Pingora 0.8
//! hands out a proxy with a custom connector only inside its own listening service, so the
//! guards cannot wrap it from outside as a `ServerApp`. Instead the service runs with
//! `HttpServerOptions::force_custom`: Pingora passes every new connection, with the shared
//! proxy, to [`handler`], which applies the guards and then serves HTTP/1.1 requests on the
//! connection exactly as Pingora's own HTTP/1 path does (keep-alive of 60 s, the
//! per-connection request limit, the session's persistent settings carried from one
//! request to the next).

use super::conn_cap::ConnectionCap;
use super::deadline::{DeadlineStream, Limits};
use pingora_core::apps::{HttpServerApp, HttpServerOptions};
use pingora_core::protocols::http::ServerSession;
use pingora_core::protocols::Stream;
use pingora_core::server::ShutdownWatch;
use pingora_proxy::ProcessCustomSession;
use std::sync::Arc;

/// Pingora's keep-alive timeout for an idle client connection, in seconds (its default).
const KEEPALIVE_S: u64 = 60;

/// The header limits of a new connection (read per connection, so a reload applies).
pub(crate) type LimitFn = Box<dyn Fn() -> Limits + Send + Sync>;

/// What every new connection goes through before its first request is read.
pub(crate) struct Guards {
    /// The connection caps (in all and per IP).
    pub cap: ConnectionCap,
    /// The deadline and size bounds of each request header.
    pub header_limits: LimitFn,
}

/// Server options for a proxy served through [`handler`]: every connection goes to it,
/// and each serves at most `max_requests` requests (0: no limit).
pub(crate) fn server_options(max_requests: u32) -> HttpServerOptions {
    let mut options = HttpServerOptions::default();
    options.force_custom = true;
    // Pingora counts reuses: a connection serves its first request plus this many more.
    options.keepalive_request_limit = max_requests.checked_sub(1);
    options
}

/// The connection handler to give Pingora's proxy service (with [`server_options`]).
pub(crate) fn handler<A, C>(guards: Arc<Guards>) -> ProcessCustomSession<A, C>
where
    pingora_proxy::HttpProxy<A, C>: HttpServerApp + Send + Sync + 'static,
    A: pingora_proxy::ProxyHttp + Send + Sync + 'static,
    A::CTX: Send + Sync,
    C: pingora_core::connectors::http::custom::Connector,
{
    Arc::new(move |proxy, stream, shutdown| {
        let guards = guards.clone();
        let shutdown = shutdown.clone();
        Box::pin(async move {
            serve(&guards, &proxy, stream, &shutdown).await;
            None
        })
    })
}

/// Serves one connection to its end.
async fn serve<A: HttpServerApp + Send + Sync>(
    guards: &Guards,
    app: &Arc<A>,
    mut stream: Stream,
    shutdown: &ShutdownWatch,
) {
    let Ok(slots) = guards.cap.count(&mut stream).await else {
        return;
    };
    let stream = DeadlineStream::wrap(stream, (guards.header_limits)());
    let mut session = ServerSession::new_http1(stream);
    if *shutdown.borrow() {
        // Shutting down: this connection serves one request.
        session.set_keepalive(None);
    } else {
        session.set_keepalive(Some(KEEPALIVE_S));
    }
    session.set_keepalive_reuses_remaining(
        app.server_options().and_then(|o| o.keepalive_request_limit),
    );
    let mut reused = app.process_new_http(session, shutdown).await;
    while let Some((stream, settings)) = reused.map(|r| r.consume()) {
        let mut session = ServerSession::new_http1(stream);
        if let Some(settings) = settings {
            settings.apply_to_session(&mut session);
        }
        reused = app.process_new_http(session, shutdown).await;
    }
    drop(slots);
}

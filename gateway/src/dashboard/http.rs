//! Dashboard routes on the admin listener:
//!
//! | Route | Answer |
//! |---|---|
//! | `GET /dashboard` | the page |
//! | `GET /dashboard/app.js`, `/dashboard/style.css` | its script and style sheet |
//! | `GET /dashboard/snapshot.json` | one [`super::snapshot::Snapshot`] |
//! | `GET /dashboard/events` | `text/event-stream`: a `snapshot` event every second |
//!
//! The admin app answers with whole responses; the event stream is written directly on
//! the session instead, for [`STREAM_TICKS`] ticks, after which the browser's
//! `EventSource` reconnects by itself (after the `retry` the stream announces).

use super::snapshot;
use crate::state::AppState;
use bytes::Bytes;
use http::Response;
use pingora_core::protocols::http::ServerSession;
use pingora_http::ResponseHeader;
use std::time::Duration;

const INDEX_HTML: &str = include_str!("index.html");
const APP_JS: &str = include_str!("app.js");
const STYLE_CSS: &str = include_str!("style.css");

/// Interval between two snapshot events.
pub(crate) const TICK: Duration = Duration::from_secs(1);
/// Events sent on one connection before it is closed (the client reconnects).
pub(crate) const STREAM_TICKS: u32 = 300;

fn reply(status: u16, content_type: &str, body: Vec<u8>) -> Response<Vec<u8>> {
    Response::builder()
        .status(status)
        .header("content-type", content_type)
        .header("content-length", body.len().to_string())
        .header("cache-control", "no-store")
        .body(body)
        .unwrap_or_else(|_| Response::new(Vec::new()))
}

/// Serves `GET /dashboard/<rest>`; `rest` is empty for the page itself.
pub(crate) async fn respond(
    state: &AppState,
    http: &mut ServerSession,
    rest: &str,
) -> Response<Vec<u8>> {
    match rest {
        "" | "index.html" => reply(200, "text/html; charset=utf-8", INDEX_HTML.into()),
        "app.js" => reply(200, "text/javascript; charset=utf-8", APP_JS.into()),
        "style.css" => reply(200, "text/css; charset=utf-8", STYLE_CSS.into()),
        "snapshot.json" => reply(
            200,
            "application/json",
            serde_json::to_vec(&snapshot::build(state)).unwrap_or_default(),
        ),
        "events" => {
            if let Err(e) = stream_events(state, http).await {
                tracing::debug!(error = %e, "dashboard event stream ended");
            }
            // The response went out on the session already; what is returned here is
            // ignored by Pingora (a header cannot be sent twice).
            Response::new(Vec::new())
        }
        other => reply(
            404,
            "text/plain; charset=utf-8",
            format!("no dashboard resource {other:?}\n").into_bytes(),
        ),
    }
}

/// One SSE `snapshot` event.
pub(crate) fn event(state: &AppState) -> Bytes {
    let json = serde_json::to_string(&snapshot::build(state)).unwrap_or_else(|_| "{}".into());
    Bytes::from(format!("event: snapshot\ndata: {json}\n\n"))
}

async fn stream_events(state: &AppState, http: &mut ServerSession) -> pingora_error::Result<()> {
    http.set_keepalive(None);
    let mut head = ResponseHeader::build(200, Some(4))?;
    head.insert_header("content-type", "text/event-stream")?;
    head.insert_header("cache-control", "no-store")?;
    head.insert_header("transfer-encoding", "chunked")?;
    head.insert_header("x-accel-buffering", "no")?;
    http.write_response_header(Box::new(head)).await?;
    http.write_response_body(Bytes::from_static(b"retry: 1000\n\n"), false)
        .await?;
    let mut tick = tokio::time::interval(TICK);
    for _ in 0..STREAM_TICKS {
        tick.tick().await;
        http.write_response_body(event(state), false).await?;
    }
    http.finish_body().await
}

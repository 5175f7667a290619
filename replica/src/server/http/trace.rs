//! W3C trace context: every request runs in a `request` span carrying the trace id of the
//! gateway's `traceparent` header, and ends with one `request` log line (INFO), so one
//! request can be followed from the gateway's log to the replica's.

use axum::extract::Request;
use axum::middleware::Next;
use axum::response::Response;
use std::time::Instant;
use tracing::Instrument;

/// The trace id (32 lowercase hex digits) of a version-00 `traceparent` value, if valid.
pub fn trace_id(traceparent: &str) -> Option<&str> {
    let mut parts = traceparent.trim().split('-');
    let (version, trace, parent, flags) =
        (parts.next()?, parts.next()?, parts.next()?, parts.next()?);
    let hex = |s: &str, n: usize| s.len() == n && s.bytes().all(|b| b.is_ascii_hexdigit());
    let ok = hex(version, 2)
        && version != "ff"
        && hex(trace, 32)
        && hex(parent, 16)
        && hex(flags, 2)
        && trace.bytes().any(|b| b != b'0');
    ok.then_some(trace)
}

/// Runs the request inside a span named by its trace id and logs its status.
pub async fn trace_request(req: Request, next: Next) -> Response {
    let trace = req
        .headers()
        .get("traceparent")
        .and_then(|v| v.to_str().ok())
        .and_then(trace_id)
        .map(str::to_ascii_lowercase)
        .unwrap_or_else(|| "-".to_string());
    let method = req.method().clone();
    let path = req.uri().path().to_string();
    let span = tracing::info_span!("request", trace_id = %trace);
    let start = Instant::now();
    let resp = next.run(req).instrument(span.clone()).await;
    span.in_scope(|| {
        tracing::info!(
            %method,
            %path,
            status = resp.status().as_u16(),
            ms = start.elapsed().as_millis() as u64,
            "request"
        );
    });
    resp
}

#[cfg(test)]
mod tests {
    use super::trace_id;

    #[test]
    fn trace_ids_are_read_from_valid_headers_only() {
        let id = "4bf92f3577b34da6a3ce929d0e0e4736";
        assert_eq!(trace_id(&format!("00-{id}-00f067aa0ba902b7-01")), Some(id));
        assert_eq!(
            trace_id("00-00000000000000000000000000000000-00f067aa0ba902b7-01"),
            None
        );
        assert_eq!(
            trace_id("ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"),
            None
        );
        assert_eq!(trace_id("00-4bf92f35-00f067aa0ba902b7-01"), None);
        assert_eq!(trace_id("garbage"), None);
    }
}

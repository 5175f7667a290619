//! Entry points for the fuzz targets in `fuzz/` (not an API): each takes arbitrary bytes,
//! runs one parser of the gateway over them, and panics when an invariant breaks. Thin
//! wrappers, so the parsers themselves stay private to their modules.

use crate::body::lines::LineSplitter;
use crate::body::request::{self, Endpoint};
use crate::body::response::ResponseTracker;
use crate::proxy::accept::head::{HeadLimits, HeadScanner, Verdict};
use crate::proxy::upstream::framing::{self, Header, Position};

/// Where to split `data` in two, from its first byte.
fn split(data: &[u8]) -> (u8, &[u8]) {
    match data.split_first() {
        Some((&b, rest)) => (b, rest),
        None => (0, data),
    }
}

/// The request body reader (`body::request`): it never accepts a body serde_json rejects.
pub fn request_body(data: &[u8]) {
    let (sel, body) = split(data);
    let endpoint = if sel & 1 == 0 {
        Endpoint::Chat
    } else {
        Endpoint::Completions
    };
    let parsed = request::parse(endpoint, body);
    if parsed.is_ok() {
        assert!(
            serde_json::from_slice::<serde_json::Value>(body).is_ok(),
            "accepted a body serde_json rejects: {:?}",
            String::from_utf8_lossy(body)
        );
    }
}

/// The response scanners (`body::response`, `body::scan`), over any chunking.
pub fn response_body(data: &[u8]) {
    let (sel, body) = split(data);
    let at = usize::from(sel).min(body.len());
    for stream in [false, true] {
        let mut t = ResponseTracker::new(stream);
        t.observe(&bytes::Bytes::copy_from_slice(&body[..at]));
        t.observe(&bytes::Bytes::copy_from_slice(&body[at..]));
        t.finish();
        let _ = (t.saw_done(), t.saw_error(), t.usage(), t.charged_tokens(7));
    }
}

/// The SSE line splitter (`body::lines`): the lines do not depend on the chunking.
pub fn sse_lines(data: &[u8]) {
    let (sel, body) = split(data);
    let at = usize::from(sel).min(body.len());
    let mut whole = LineSplitter::default();
    let one = whole.push(body);
    let mut pieces = LineSplitter::default();
    let mut two = pieces.push(&body[..at]);
    two.extend(pieces.push(&body[at..]));
    assert_eq!(one, two, "lines depend on where the stream was split");
    let newlines = body.iter().filter(|&&b| b == b'\n').count();
    assert_eq!(one.len(), newlines);
}

/// The upstream framing reader (`proxy::upstream::framing`).
pub fn upstream_header(data: &[u8]) {
    match framing::header(data) {
        Header::Body { length, .. } => {
            assert!(data.ends_with(b"\r\n\r\n"));
            let n = usize::try_from(length.min(1 << 20)).unwrap_or(0);
            let _ = Position::after_body(length, n);
        }
        Header::Empty => assert!(data.ends_with(b"\r\n\r\n")),
        Header::Unknown => {}
    }
}

/// The request head bounds (`proxy::accept::head`): the verdict does not depend on the
/// chunking, and a head within bounds ends where it ends.
pub fn request_head(data: &[u8]) {
    let (sel, head) = split(data);
    let limits = HeadLimits {
        max_bytes: 64 + usize::from(sel) * 4,
        max_headers: usize::from(sel % 16),
    };
    let whole = HeadScanner::new().feed(head, limits);
    let at = usize::from(sel).min(head.len());
    let mut s = HeadScanner::new();
    let split = match s.feed(&head[..at], limits) {
        Verdict::Partial => match s.feed(&head[at..], limits) {
            Verdict::Complete { at: end } => Verdict::Complete { at: end + at },
            v => v,
        },
        v => v,
    };
    assert_eq!(whole, split, "the verdict depends on the chunking");
    if let Verdict::Complete { at } = whole {
        assert!(at <= head.len() && at <= limits.max_bytes);
        assert_eq!(head[at - 1], b'\n');
    }
}

/// The config loader (`config`): any text parses or fails with an error, and validation
/// of what parsed never panics.
pub fn config(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    if let Ok(cfg) = crate::config::Config::from_yaml(text) {
        let _ = cfg.validate();
    }
}

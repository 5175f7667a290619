//! W3C trace context: continue the client's trace (new span id for our hop) or start one,
//! and send `traceparent` to the replica. The trace id doubles as the request id.

use rand::RngCore;

/// A `traceparent` for the upstream request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TraceContext {
    trace_id: [u8; 16],
    span_id: [u8; 8],
    flags: u8,
}

impl TraceContext {
    /// A new trace (sampled).
    pub fn new_root() -> Self {
        let mut rng = rand::thread_rng();
        let mut trace_id = [0u8; 16];
        let mut span_id = [0u8; 8];
        rng.fill_bytes(&mut trace_id);
        rng.fill_bytes(&mut span_id);
        Self {
            trace_id,
            span_id,
            flags: 1,
        }
    }

    /// Continues the trace of an incoming `traceparent` with a new span id; `None` if the
    /// header is malformed (version 00 layout, non-zero ids).
    pub fn child_of(header: &str) -> Option<Self> {
        let parts: Vec<&str> = header.trim().split('-').collect();
        if parts.len() < 4 || parts[0].len() != 2 || parts[0] == "ff" {
            return None;
        }
        let trace: [u8; 16] = hex::decode(parts[1]).ok()?.try_into().ok()?;
        let parent: [u8; 8] = hex::decode(parts[2]).ok()?.try_into().ok()?;
        let flags: [u8; 1] = hex::decode(parts[3]).ok()?.try_into().ok()?;
        if trace == [0; 16] || parent == [0; 8] {
            return None;
        }
        let mut span_id = [0u8; 8];
        rand::thread_rng().fill_bytes(&mut span_id);
        Some(Self {
            trace_id: trace,
            span_id,
            flags: flags[0],
        })
    }

    /// The trace id as 32 hex digits (the request id: one allocation, shared after).
    pub fn trace_id_hex(&self) -> std::sync::Arc<str> {
        const DIGITS: &[u8; 16] = b"0123456789abcdef";
        let mut buf = [0u8; 32];
        for (i, &b) in self.trace_id.iter().enumerate() {
            buf[2 * i] = DIGITS[usize::from(b >> 4)];
            buf[2 * i + 1] = DIGITS[usize::from(b & 15)];
        }
        std::str::from_utf8(&buf).unwrap_or_default().into()
    }

    /// [`Self::header`] as a header value (hex digits and dashes: always valid).
    pub fn header_value(&self) -> http::HeaderValue {
        http::HeaderValue::try_from(self.header())
            .unwrap_or_else(|_| http::HeaderValue::from_static(""))
    }

    /// The `traceparent` header value naming our span as the parent.
    pub fn header(&self) -> String {
        let mut s = String::with_capacity(55);
        s.push_str("00-");
        push_hex(&mut s, &self.trace_id);
        s.push('-');
        push_hex(&mut s, &self.span_id);
        s.push('-');
        push_hex(&mut s, &[self.flags]);
        s
    }
}

/// Appends `bytes` as lowercase hex (one allocation for the whole header, not one per part).
fn push_hex(out: &mut String, bytes: &[u8]) {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    for &b in bytes {
        out.push(char::from(DIGITS[usize::from(b >> 4)]));
        out.push(char::from(DIGITS[usize::from(b & 15)]));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn continues_an_incoming_trace_with_a_new_span() {
        let incoming = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
        let t = TraceContext::child_of(incoming).unwrap();
        assert_eq!(&*t.trace_id_hex(), "4bf92f3577b34da6a3ce929d0e0e4736");
        let h = t.header();
        assert!(h.starts_with("00-4bf92f3577b34da6a3ce929d0e0e4736-"));
        assert!(h.ends_with("-01"));
        assert_ne!(h, incoming);
        assert!(TraceContext::child_of("garbage").is_none());
        assert!(
            TraceContext::child_of("00-00000000000000000000000000000000-00f067aa0ba902b7-01")
                .is_none()
        );
        assert_eq!(TraceContext::new_root().header().len(), 55);
        let t = TraceContext::child_of("00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01")
            .unwrap();
        assert_eq!(&*t.trace_id_hex(), "0af7651916cd43dd8448eb211c80319c");
        assert_eq!(
            t.header(),
            format!(
                "00-0af7651916cd43dd8448eb211c80319c-{}-01",
                hex::encode(t.span_id)
            )
        );
    }
}

//! W3C trace context: continue the client's trace (new span id for our hop) or start one,
//! and send `traceparent` to the replica. The trace id doubles as the request id.

use rand::RngCore;

/// A `traceparent` for the upstream request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct TraceContext {
    trace_id: [u8; 16],
    span_id: [u8; 8],
    flags: u8,
}

impl TraceContext {
    /// A new trace (sampled).
    pub(crate) fn new_root() -> Self {
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
    pub(crate) fn child_of(header: &str) -> Option<Self> {
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

    /// The trace id as 32 hex digits.
    fn trace_id_digits(&self) -> [u8; 32] {
        let mut buf = [0u8; 32];
        // Fixed lengths (16 bytes into 32 digits): the encoding cannot fail.
        let _ = hex::encode_to_slice(self.trace_id, &mut buf);
        buf
    }

    /// The trace id as 32 hex digits.
    #[cfg(test)]
    fn trace_id_hex(&self) -> String {
        String::from_utf8_lossy(&self.trace_id_digits()).into_owned()
    }

    /// The request id this trace names (its trace id), made once as a header value: one
    /// allocation, shared by every clone (upstream header, response header, decision log).
    pub(crate) fn request_id(&self) -> RequestId {
        let header =
            http::HeaderValue::from_maybe_shared(bytes::Bytes::from_owner(self.trace_id_digits()))
                .unwrap_or_else(|_| http::HeaderValue::from_static(""));
        RequestId { header }
    }

    /// The `traceparent` wire form naming our span as the parent (55 bytes).
    fn wire(&self) -> [u8; 55] {
        let mut buf = *b"00-00000000000000000000000000000000-0000000000000000-00";
        // Fixed lengths: the encodings cannot fail.
        let _ = hex::encode_to_slice(self.trace_id, &mut buf[3..35]);
        let _ = hex::encode_to_slice(self.span_id, &mut buf[36..52]);
        let _ = hex::encode_to_slice([self.flags], &mut buf[53..55]);
        buf
    }

    /// [`Self::header`] as a header value (hex digits and dashes: always valid).
    pub(crate) fn header_value(&self) -> http::HeaderValue {
        http::HeaderValue::from_bytes(&self.wire())
            .unwrap_or_else(|_| http::HeaderValue::from_static(""))
    }

    /// The `traceparent` header value naming our span as the parent.
    #[cfg(test)]
    pub(crate) fn header(&self) -> String {
        String::from_utf8_lossy(&self.wire()).into_owned()
    }
}

/// A request's id (the W3C trace id) as its `x-request-id` header value, made once: it goes
/// upstream, back to the client and into the decision log without being formatted again.
#[derive(Clone, Debug)]
pub(crate) struct RequestId {
    /// The header value (32 hex digits).
    pub header: http::HeaderValue,
}

impl RequestId {
    /// The id as text (logs, the dashboard).
    pub(crate) fn text(&self) -> &str {
        self.header.to_str().unwrap_or_default()
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
        assert_eq!(t.header_value(), t.header().as_str());
        let id = t.request_id();
        assert_eq!(id.text(), "4bf92f3577b34da6a3ce929d0e0e4736");
        assert_eq!(id.header, "4bf92f3577b34da6a3ce929d0e0e4736");
        // Every clone (upstream header, response header, decision log) shares the bytes.
        assert_eq!(
            id.clone().header.as_bytes().as_ptr(),
            id.header.as_bytes().as_ptr()
        );
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

//! How the writes on an upstream connection line up with the requests they carry: enough
//! HTTP/1 framing for [`super::Coalesce`] to know a request header when it sees one, and
//! when its body is over.

/// Where the writes on a connection stand.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Position {
    /// The next write starts a request header.
    Boundary,
    /// This many body bytes of the current request are still to come.
    Body(u64),
    /// The framing is not followed (a chunked request, a header written in pieces):
    /// nothing is held on this connection again.
    Lost,
}

impl Position {
    /// The position after `n` more bytes of a body.
    pub(crate) fn after_body(left: u64, n: usize) -> Self {
        match left.checked_sub(n as u64) {
            Some(0) => Self::Boundary,
            Some(rest) => Self::Body(rest),
            None => Self::Lost,
        }
    }
}

/// What a write made at a request boundary announces.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Header {
    /// A complete request header whose body of `length` bytes follows; `hold`: the
    /// header may wait for the body (not when the client expects `100 Continue` first).
    Body { length: u64, hold: bool },
    /// A complete request header with no body.
    Empty,
    /// Anything else: a chunked body, a header split over writes, not a header.
    Unknown,
}

/// Reads one complete HTTP/1 request header, as Pingora writes it (one write, `name:
/// value` lines, names in any case).
pub(crate) fn header(buf: &[u8]) -> Header {
    if !buf.ends_with(b"\r\n\r\n") {
        return Header::Unknown;
    }
    // Every line of `head` ends with "\r\n"; the first is the request line.
    let head = &buf[..buf.len() - 2];
    let Some(first) = memchr::memchr(b'\n', head) else {
        return Header::Unknown;
    };
    let line = &head[..first];
    if !line.ends_with(b" HTTP/1.1\r") && !line.ends_with(b" HTTP/1.0\r") {
        return Header::Unknown;
    }
    let (mut length, mut hold) = (None, true);
    // Each header line starts after a newline; one pass finds them all.
    let mut start = first + 1;
    for end in memchr::memchr_iter(b'\n', &head[start..]).map(|at| at + first + 1) {
        let line = &head[start..end];
        start = end + 1;
        if line.len() < 2 {
            // An empty line before the end: more than one message.
            return Header::Unknown;
        }
        match line[0] | 0x20 {
            b'c' if has_name(line, b"content-length:") => {
                let value = line[15..].trim_ascii();
                if length.is_some() || value.is_empty() || !value.iter().all(u8::is_ascii_digit) {
                    return Header::Unknown;
                }
                match std::str::from_utf8(value).ok().and_then(|v| v.parse().ok()) {
                    Some(n) => length = Some(n),
                    None => return Header::Unknown,
                }
            }
            b't' if has_name(line, b"transfer-encoding:") => return Header::Unknown,
            b'e' if has_name(line, b"expect:") => hold = false,
            _ => {}
        }
    }
    match length {
        Some(length) if length > 0 => Header::Body { length, hold },
        _ => Header::Empty,
    }
}

/// Whether `line` starts with `name` (which ends with its colon), in any case.
fn has_name(line: &[u8], name: &[u8]) -> bool {
    line.len() >= name.len() && line[..name.len()].eq_ignore_ascii_case(name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_header_announces_its_body() {
        let h = b"POST /v1/chat/completions HTTP/1.1\r\nHost: a\r\n\
                  Content-Type: application/json\r\nContent-Length: 156\r\n\r\n";
        assert_eq!(
            header(h),
            Header::Body {
                length: 156,
                hold: true
            }
        );
        let lower = b"POST / HTTP/1.1\r\ncontent-length:  7 \r\nx-a: b\r\n\r\n";
        assert_eq!(
            header(lower),
            Header::Body {
                length: 7,
                hold: true
            }
        );
        let expect = b"POST / HTTP/1.1\r\nExpect: 100-continue\r\nContent-Length: 7\r\n\r\n";
        assert_eq!(
            header(expect),
            Header::Body {
                length: 7,
                hold: false
            }
        );
    }

    #[test]
    fn anything_but_one_complete_length_framed_header_is_not_held() {
        for (buf, want) in [
            (
                &b"GET /v1/models HTTP/1.1\r\nHost: a\r\n\r\n"[..],
                Header::Empty,
            ),
            (
                b"POST / HTTP/1.1\r\nContent-Length: 0\r\n\r\n",
                Header::Empty,
            ),
            (
                b"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n",
                Header::Unknown,
            ),
            (b"POST / HTTP/1.1\r\nContent-Length: 5\r\n", Header::Unknown),
            (
                b"POST / HTTP/1.1\r\nContent-Length: 5\r\nContent-Length: 5\r\n\r\n",
                Header::Unknown,
            ),
            (
                b"POST / HTTP/1.1\r\nContent-Length: -5\r\n\r\n",
                Header::Unknown,
            ),
            (
                b"POST / HTTP/1.1\r\nContent-Length: 99999999999999999999999\r\n\r\n",
                Header::Unknown,
            ),
            (
                b"POST / HTTP/1.1\r\n\r\nContent-Length: 5\r\n\r\n",
                Header::Unknown,
            ),
            (b"{\"a\":1}\r\n\r\n", Header::Unknown),
            (
                b"POST / HTTP/2\r\nContent-Length: 5\r\n\r\n",
                Header::Unknown,
            ),
            (b"\r\n\r\n", Header::Unknown),
        ] {
            assert_eq!(header(buf), want, "{}", String::from_utf8_lossy(buf));
        }
    }

    #[test]
    fn a_body_ends_at_its_length() {
        assert_eq!(Position::after_body(10, 4), Position::Body(6));
        assert_eq!(Position::after_body(10, 10), Position::Boundary);
        assert_eq!(Position::after_body(10, 11), Position::Lost);
    }
}

//! Bounds on a request head as it streams in (`limits.max_header_bytes`,
//! `limits.max_headers`).
//!
//! Pingora buffers a request head of up to 1 MiB and 256 header lines before any hook of
//! the gateway runs, so a check in the request phase comes after the memory is spent.
//! [`HeadScanner`] sees the bytes of each head as the connection wrapper
//! (`super::deadline::DeadlineStream`) hands them to Pingora: it counts bytes and lines up
//! to the empty line that ends the head, and says [`Verdict::TooLarge`] as soon as either
//! bound is passed, before the bytes reach Pingora's buffer. The wrapper then answers
//! `431` with an OpenAI error and closes the connection.
//!
//! Line ends are LF with an optional CR before it (what Pingora's parser accepts); empty
//! lines before the request line are counted as bytes but do not end the head. Every
//! non-empty line after the request line counts as one header (an obs-fold continuation
//! included: Pingora refuses those anyway).

/// What the scanner has seen so far of one head.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Verdict {
    /// Within bounds; the head goes on.
    Partial,
    /// The head ended within bounds, `at` bytes into the last piece fed; what follows is
    /// body or the next request, not counted.
    Complete {
        /// Bytes of the last piece that belong to the head.
        at: usize,
    },
    /// Over a bound: refuse.
    TooLarge,
}

/// The bounds of one head.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct HeadLimits {
    /// Largest head in bytes, request line and line ends included.
    pub max_bytes: usize,
    /// Most header lines (the request line not counted).
    pub max_headers: usize,
}

/// Counts one request head (see the module docs).
#[derive(Clone, Debug, Default)]
pub(crate) struct HeadScanner {
    bytes: usize,
    /// Non-empty lines ended so far (the request line included).
    lines: usize,
    /// The current line has a byte other than CR.
    line_has_text: bool,
    done: bool,
}

impl HeadScanner {
    /// A scanner at the start of a head.
    pub(crate) fn new() -> Self {
        Self::default()
    }

    /// Starts over for the next request's head.
    pub(crate) fn reset(&mut self) {
        *self = Self::default();
    }

    /// The head has ended (nothing more is counted until [`Self::reset`]).
    #[cfg(test)]
    pub(crate) fn is_done(&self) -> bool {
        self.done
    }

    /// Feeds the next piece of the connection's bytes.
    pub(crate) fn feed(&mut self, data: &[u8], limits: HeadLimits) -> Verdict {
        if self.done {
            return Verdict::Complete { at: 0 };
        }
        let mut pos = 0;
        while pos < data.len() {
            let rest = &data[pos..];
            let Some(nl) = memchr::memchr(b'\n', rest) else {
                self.bytes += rest.len();
                self.line_has_text |= rest.iter().any(|&b| b != b'\r');
                return self.check(limits, Verdict::Partial);
            };
            self.bytes += nl + 1;
            let text = self.line_has_text || rest[..nl].iter().any(|&b| b != b'\r');
            self.line_has_text = false;
            pos += nl + 1;
            if text {
                self.lines += 1;
            } else if self.lines > 0 {
                self.done = true;
                return self.check(limits, Verdict::Complete { at: pos });
            }
            if self.over(limits) {
                return Verdict::TooLarge;
            }
        }
        self.check(limits, Verdict::Partial)
    }

    fn over(&self, limits: HeadLimits) -> bool {
        self.bytes > limits.max_bytes || self.lines > limits.max_headers.saturating_add(1)
    }

    fn check(&self, limits: HeadLimits, ok: Verdict) -> Verdict {
        if self.over(limits) {
            Verdict::TooLarge
        } else {
            ok
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const L: HeadLimits = HeadLimits {
        max_bytes: 64,
        max_headers: 3,
    };

    #[test]
    fn a_head_within_bounds_completes_where_it_ends() {
        let head = b"GET / HTTP/1.1\r\nHost: x\r\n\r\nBODY";
        assert_eq!(
            HeadScanner::new().feed(head, L),
            Verdict::Complete { at: head.len() - 4 }
        );
        // Bare LF line ends and a head split anywhere.
        let head = b"\r\nGET / HTTP/1.1\nA: 1\r\nB: 2\n\nrest";
        for split in 0..head.len() {
            let mut s = HeadScanner::new();
            let first = s.feed(&head[..split], L);
            let v = match first {
                Verdict::Complete { at } => Verdict::Complete { at },
                _ => match s.feed(&head[split..], L) {
                    Verdict::Complete { at } => Verdict::Complete { at: at + split },
                    v => v,
                },
            };
            assert_eq!(v, Verdict::Complete { at: head.len() - 4 }, "split {split}");
        }
    }

    #[test]
    fn too_many_bytes_or_lines_is_too_large_before_the_head_ends() {
        let mut s = HeadScanner::new();
        assert_eq!(s.feed(b"GET / HTTP/1.1\r\nX: ", L), Verdict::Partial);
        assert_eq!(s.feed(&[b'a'; 64], L), Verdict::TooLarge);
        let mut s = HeadScanner::new();
        let lines = b"GET / HTTP/1.1\r\nA: 1\r\nB: 2\r\nC: 3\r\n";
        assert_eq!(s.feed(lines, L), Verdict::Partial);
        assert_eq!(s.feed(b"D: 4\r\n", L), Verdict::TooLarge);
        // Exactly at the bounds is fine.
        let mut s = HeadScanner::new();
        assert_eq!(s.feed(lines, L), Verdict::Partial);
        assert!(matches!(s.feed(b"\r\n", L), Verdict::Complete { .. }));
    }

    #[test]
    fn a_done_scanner_counts_nothing_until_reset() {
        let mut s = HeadScanner::new();
        assert!(matches!(
            s.feed(b"GET / HTTP/1.1\r\n\r\n", L),
            Verdict::Complete { .. }
        ));
        assert!(s.is_done());
        assert_eq!(s.feed(&[b'x'; 1000], L), Verdict::Complete { at: 0 });
        s.reset();
        assert_eq!(s.feed(&[b'x'; 1000], L), Verdict::TooLarge);
    }
}

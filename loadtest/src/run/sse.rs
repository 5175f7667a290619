//! Incremental server-sent-events parsing: bytes in, `data:` payloads out, across any
//! chunking of the byte stream.

/// Splits a byte stream into SSE `data` payloads.
#[derive(Debug, Default)]
pub struct SseParser {
    buf: Vec<u8>,
    data: Vec<String>,
}

impl SseParser {
    /// A parser at the start of a stream.
    pub fn new() -> Self {
        Self::default()
    }

    /// Feeds bytes; returns the payloads of every event completed by them (an event ends at
    /// a blank line; multi-line `data:` fields are joined with `\n`).
    pub fn feed(&mut self, bytes: &[u8]) -> Vec<String> {
        self.buf.extend_from_slice(bytes);
        let mut out = Vec::new();
        while let Some(pos) = self.buf.iter().position(|&b| b == b'\n') {
            let mut line: Vec<u8> = self.buf.drain(..=pos).collect();
            line.pop();
            if line.last() == Some(&b'\r') {
                line.pop();
            }
            let line = String::from_utf8_lossy(&line);
            if line.is_empty() {
                if !self.data.is_empty() {
                    out.push(self.data.join("\n"));
                    self.data.clear();
                }
            } else if let Some(rest) = line.strip_prefix("data:") {
                self.data
                    .push(rest.strip_prefix(' ').unwrap_or(rest).to_string());
            }
            // Comments (":") and other fields (event:, id:, retry:) are ignored.
        }
        out
    }

    /// Ends the stream: a final event without its blank line is still returned.
    pub fn finish(&mut self) -> Option<String> {
        if !self.buf.is_empty() {
            let rest = std::mem::take(&mut self.buf);
            let mut tail = self.feed_line_end(&rest);
            if let Some(x) = tail.pop() {
                return Some(x);
            }
        }
        (!self.data.is_empty()).then(|| std::mem::take(&mut self.data).join("\n"))
    }

    fn feed_line_end(&mut self, rest: &[u8]) -> Vec<String> {
        let mut v = rest.to_vec();
        v.extend_from_slice(b"\n\n");
        self.feed(&v)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn payloads_survive_any_chunking() {
        let stream =
            b"data: {\"a\":1}\n\n: keepalive\n\ndata: {\"b\":2}\r\n\r\nevent: x\ndata: [DONE]\n\n";
        for split in 1..stream.len() {
            let mut p = SseParser::new();
            let mut got = p.feed(&stream[..split]);
            got.extend(p.feed(&stream[split..]));
            assert_eq!(
                got,
                vec!["{\"a\":1}", "{\"b\":2}", "[DONE]"],
                "split at {split}"
            );
        }
        let mut p = SseParser::new();
        assert!(p.feed(b"data: tail").is_empty());
        assert_eq!(p.finish().as_deref(), Some("tail"));
    }
}

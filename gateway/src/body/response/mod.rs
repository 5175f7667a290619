//! Watching a response as it passes through (never delaying it): usage for settling token
//! reservations and cache metrics, and whether an SSE stream ended with `[DONE]`.

use crate::body::gather::Gathered;
use crate::body::lines::LineSplitter;
use envelope::{body_usage, Envelope};

mod envelope;
#[cfg(test)]
mod envelope_tests;

pub(crate) use envelope::Usage;

/// Largest non-streaming body kept for usage parsing.
const MAX_JSON_BYTES: usize = 8 << 20;

/// Observes one response body.
#[derive(Default)]
pub(crate) struct ResponseTracker {
    stream: bool,
    lines: LineSplitter,
    /// A non-streaming body (bounded by [`MAX_JSON_BYTES`]), read once it is complete.
    json: Gathered,
    overflow: bool,
    saw_done: bool,
    saw_error: bool,
    content_chunks: u64,
    usage: Option<Usage>,
}

impl std::fmt::Debug for ResponseTracker {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ResponseTracker")
            .field("stream", &self.stream)
            .field("usage", &self.usage)
            .finish()
    }
}

impl ResponseTracker {
    /// A tracker for an SSE (`stream`) or JSON body.
    pub(crate) fn new(stream: bool) -> Self {
        Self {
            stream,
            ..Default::default()
        }
    }

    /// Feeds one body chunk, as Pingora hands it over (a non-streaming body that comes in
    /// one chunk is kept by reference, not copied).
    pub(crate) fn observe(&mut self, chunk: &bytes::Bytes) {
        if !self.stream {
            if self.overflow {
                return;
            }
            if self.json.len() + chunk.len() > MAX_JSON_BYTES {
                self.overflow = true;
                self.json = Gathered::default();
                return;
            }
            self.json.push(chunk.clone(), || 0);
            return;
        }
        for line in self.lines.push(chunk) {
            let Some(data) = line.strip_prefix(b"data:") else {
                continue;
            };
            let data = data.trim_ascii();
            if data == b"[DONE]" {
                self.saw_done = true;
                continue;
            }
            let Some(env) = Envelope::parse(data) else {
                continue;
            };
            if env.error {
                self.saw_error = true;
            }
            if env.usage.is_some() {
                self.usage = env.usage;
            }
            self.content_chunks += env.choices;
        }
    }

    /// Parses the collected JSON body (non-streaming) once it is complete.
    pub(crate) fn finish(&mut self) {
        if self.stream || self.overflow {
            return;
        }
        let body = std::mem::take(&mut self.json);
        if body.is_empty() {
            return;
        }
        self.usage = body_usage(body.as_slice());
    }

    /// True once a stream has sent `data: [DONE]`.
    pub(crate) fn saw_done(&self) -> bool {
        self.saw_done
    }

    /// True when a stream carried an error event (a non-streaming body is not checked:
    /// its status says it).
    pub(crate) fn saw_error(&self) -> bool {
        self.saw_error
    }

    /// Reported usage, if any.
    pub(crate) fn usage(&self) -> Option<Usage> {
        self.usage
    }

    /// Tokens to charge: reported usage, else `prompt_tokens` plus one per content chunk.
    pub(crate) fn charged_tokens(&self, prompt_tokens: u64) -> u64 {
        match self.usage {
            Some(u) => u.prompt_tokens + u.completion_tokens,
            None => prompt_tokens + self.content_chunks,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stream_usage_and_done_across_chunk_boundaries() {
        let mut t = ResponseTracker::new(true);
        t.observe(&bytes::Bytes::from_static(
            b"data: {\"choices\":[{\"delta\":{\"content\":\"a\"}}]}\n\nda",
        ));
        t.observe(&bytes::Bytes::from_static(
            b"ta: {\"choices\":[],\"usage\":{\"prompt_tokens\":10,\"completion_tokens\":2,",
        ));
        assert!(!t.saw_done());
        t.observe(&bytes::Bytes::from_static(
            b"\"prompt_tokens_details\":{\"cached_tokens\":8}}}\n\ndata: [DONE]\n\n",
        ));
        assert!(t.saw_done());
        assert_eq!(
            t.usage(),
            Some(Usage {
                prompt_tokens: 10,
                completion_tokens: 2,
                cached_tokens: Some(8)
            })
        );
        assert_eq!(t.charged_tokens(99), 12);
    }

    #[test]
    fn stream_without_usage_is_estimated_and_errors_are_seen() {
        let mut t = ResponseTracker::new(true);
        t.observe(&bytes::Bytes::from_static(
            b"data: {\"choices\":[{\"delta\":{}}]}\n\ndata: {\"choices\":[{\"delta\":{}}]}\n\n",
        ));
        assert_eq!(t.charged_tokens(5), 7);
        t.observe(&bytes::Bytes::from_static(
            b"data: {\"error\":{\"message\":\"x\"}}\n\n",
        ));
        assert!(t.saw_error());
        assert!(!t.saw_done());
    }

    #[test]
    fn json_usage_is_read_whole_or_gathered_and_bounded() {
        let body = bytes::Bytes::from_static(
            br#"{"choices":[],"usage":{"prompt_tokens":3,"completion_tokens":4}}"#,
        );
        let want = Some(Usage {
            prompt_tokens: 3,
            completion_tokens: 4,
            cached_tokens: None,
        });
        let mut whole = ResponseTracker::new(false);
        whole.observe(&body);
        whole.finish();
        assert_eq!(whole.usage(), want, "one chunk, kept by reference");
        let mut pieces = ResponseTracker::new(false);
        for piece in [body.slice(..10), body.slice(10..30), body.slice(30..)] {
            pieces.observe(&piece);
        }
        pieces.finish();
        assert_eq!(pieces.usage(), want, "several chunks, gathered");
        let mut big = ResponseTracker::new(false);
        big.observe(&body);
        big.observe(&bytes::Bytes::from(vec![b' '; MAX_JSON_BYTES]));
        big.finish();
        assert_eq!(big.usage(), None, "over the bound: not parsed");
    }

    #[test]
    fn json_usage_is_parsed_at_finish() {
        let mut t = ResponseTracker::new(false);
        t.observe(&bytes::Bytes::from_static(
            br#"{"choices":[],"usage":{"prompt_tokens":3,"#,
        ));
        t.observe(&bytes::Bytes::from_static(br#""completion_tokens":4}}"#));
        t.finish();
        assert_eq!(
            t.usage(),
            Some(Usage {
                prompt_tokens: 3,
                completion_tokens: 4,
                cached_tokens: None
            })
        );
    }

    /// The reference reading: a `serde_json::Value`, looked up field by field.
    pub(super) fn by_value(bytes: &[u8]) -> Option<(Option<Usage>, bool, u64)> {
        let v: serde_json::Value = serde_json::from_slice(bytes).ok()?;
        let usage = v.get("usage").filter(|u| !u.is_null()).map(|u| Usage {
            prompt_tokens: u.get("prompt_tokens").and_then(|x| x.as_u64()).unwrap_or(0),
            completion_tokens: u
                .get("completion_tokens")
                .and_then(|x| x.as_u64())
                .unwrap_or(0),
            cached_tokens: u
                .pointer("/prompt_tokens_details/cached_tokens")
                .and_then(|x| x.as_u64()),
        });
        let choices = v
            .get("choices")
            .and_then(|c| c.as_array())
            .map_or(0, |c| c.len() as u64);
        Some((usage, v.get("error").is_some(), choices))
    }

    #[test]
    fn envelope_reads_what_a_value_lookup_reads() {
        let cases: &[&[u8]] = &[
            br#"{"choices":[{"a":1},{"b":[2,{"c":null}]}],"usage":{"prompt_tokens":5,"completion_tokens":2,"prompt_tokens_details":{"cached_tokens":4}}}"#,
            br#"{"usage":null,"choices":[]}"#,
            br#"{"usage":{"prompt_tokens":"x","completion_tokens":-1,"prompt_tokens_details":{"cached_tokens":1.5}}}"#,
            br#"{"usage":{"prompt_tokens_details":null},"error":null}"#,
            br#"{"usage":7,"choices":{"x":1}}"#,
            br#"{"usage":[1,2],"error":{"message":"m"}}"#,
            br#"{"us\u0061ge":{"prompt_tokens":3},"choices":"no"}"#,
            br#"{"usage":{"prompt_tokens":1},"usage":{"prompt_tokens":9}}"#,
            br#"[{"usage":{"prompt_tokens":1}}]"#,
            br#""text""#,
            br#"{"usage":{"prompt_tokens":1}"#,
            br#"{} trailing"#,
        ];
        for c in cases {
            let env = Envelope::parse(c).map(|e| (e.usage, e.error, e.choices));
            assert_eq!(env, by_value(c), "{}", String::from_utf8_lossy(c));
        }
    }

    /// Asserts that the scanner reads each case as the reference does.
    fn agree(cases: &[&[u8]]) {
        for c in cases {
            let env = Envelope::parse(c).map(|e| (e.usage, e.error, e.choices));
            assert_eq!(env, by_value(c), "{}", c.escape_ascii());
        }
    }

    #[test]
    fn envelope_edge_cases_match_a_value_lookup() {
        agree(&[
            // Counts: only non-negative integers that fit u64 count.
            br#"{"usage":{"prompt_tokens":1e2,"completion_tokens":10.0}}"#,
            br#"{"usage":{"prompt_tokens":-0,"completion_tokens":18446744073709551615}}"#,
            br#"{"usage":{"prompt_tokens_details":{"cached_tokens":18446744073709551616}}}"#,
            br#"{"usage":{"prompt_tokens":true,"prompt_tokens_details":[{"cached_tokens":1}]}}"#,
            // Duplicates: the last one wins, also across spellings of the same key.
            br#"{"choices":[1,2],"choices":3}"#,
            br#"{"usage":{"prompt_tokens":1},"us\u0061ge":null,"error":null}"#,
            br#"{"usage":{"prompt_tokens_details":{"cached_tokens":1,"cached_tokens":"x"}}}"#,
            br#"{"\u0075sage":{"prompt\u005ftokens":3,"prompt_tokens_det\u0061ils":{"cached_tokens":2}}}"#,
            br#"{"usage\u0000":{"prompt_tokens":3},"us\u00e1ge":{"prompt_tokens":4}}"#,
            // Strings: escapes, surrogates, control characters, UTF-8.
            br#"{"a":"\ud83d\ude00 \" \\ \/ \b \f \n \r \t \u00e9"}"#,
            br#"{"a":"\ud83d"}"#,
            br#"{"a":"\ude00"}"#,
            br#"{"a":"\ude00\ud83d"}"#,
            br#"{"a":"\ud83d\u0041"}"#,
            br#"{"a":"\ud83d\n"}"#,
            br#"{"a":"\x"}"#,
            br#"{"a":"\u12G4"}"#,
            br#"{"a":"\u12"}"#,
            b"{\"a\":\"\x01\"}",
            b"{\"a\":\"\x7f\"}",
            b"{\"a\":\"\xff\"}",
            b"{\"a\":\"\xc0\xaf\"}",
            b"{\"a\":\"\xed\xa0\x80\"}",
            b"{\"a\":\"\xe4\xb8\"}",
            b"{\"a\":\"\xe4\xb8\\n\xad\"}",
            "{\"a\":\"中文 😀\"}".as_bytes(),
            // Whitespace: only space, tab, line feed and carriage return.
            b" \t\n\r{\"usage\" : { \"prompt_tokens\" :\t2 } } \r\n",
            b"{\x0c}",
            b"\xc2\xa0{}",
            b"\xef\xbb\xbf{}",
            b"",
            b"  ",
            // Numbers: syntax and range.
            br#"[1e400]"#,
            br#"[-1e309]"#,
            br#"[1e-400, 0e99999999999, 1e-99999999999, 0.0e999]"#,
            br#"[1.7976931348623157e308, 1.7976931348623159e308, 17976931348623157e292]"#,
            br#"[1e99999999999]"#,
            br#"[01]"#,
            br#"[1.]"#,
            br#"[.5]"#,
            br#"[+1]"#,
            br#"[-]"#,
            br#"[1e]"#,
            br#"[1e+]"#,
            br#"[-01]"#,
            br#"[1.5e+3, -0.0, 2E-2]"#,
            // Grammar: trailing input, commas, keys, literals.
            br#"{}x"#,
            br#"{},"#,
            br#"{}{}"#,
            br#"[1,]"#,
            br#"{"a":1,}"#,
            br#"{,}"#,
            br#"{"a"}"#,
            br#"{"a":}"#,
            br#"{1:2}"#,
            br#"[nul]"#,
            br#"[nulll]"#,
            br#"[True]"#,
            br#"[1 2]"#,
            br#"{"a":1 "b":2}"#,
            // Top-level values that are not objects read as nothing.
            br#"[]"#,
            br#"1"#,
            br#"null"#,
            br#""usage""#,
        ]);
    }

    #[test]
    fn envelope_pinned_answers() {
        let read = |doc: &[u8]| Envelope::parse(doc).map(|e| (e.usage, e.error, e.choices));
        let usage = |prompt_tokens, completion_tokens, cached_tokens| {
            Some(Usage {
                prompt_tokens,
                completion_tokens,
                cached_tokens,
            })
        };
        let doc = br#"{"us\u0061ge":{"prompt_tokens":3},"usage":{"completion_tokens":2}}"#;
        assert_eq!(read(doc), Some((usage(0, 2, None), false, 0)));
        let doc = br#"{"usage":{"prompt_tokens":1e2,"completion_tokens":-1,"x":1.5}}"#;
        assert_eq!(read(doc), Some((usage(0, 0, None), false, 0)));
        let doc = br#"{"usage":"?","error":null,"choices":[{},[]]}"#;
        assert_eq!(read(doc), Some((usage(0, 0, None), true, 2)));
        assert_eq!(read(br#"["usage",{"usage":{}}]"#), Some((None, false, 0)));
        assert_eq!(read(br#"{"a":"\ud83d"}"#), None, "lone surrogate");
        assert_eq!(read(b"[1e400]"), None, "beyond f64");
        assert_eq!(read(b"{} {}"), None, "trailing value");
    }

    #[test]
    fn envelope_nesting_stops_where_serde_json_stops() {
        // `depth` arrays/objects open at once, the outermost being the envelope itself.
        let nested = |depth: usize, open: &str, inner: &str, close: &str| {
            let (open, close) = (open.repeat(depth - 1), close.repeat(depth - 1));
            format!(r#"{{"usage":{open}{inner}{close}}}"#).into_bytes()
        };
        for depth in [126, 127, 128, 129] {
            let arrays = format!("{}{}", "[".repeat(depth), "]".repeat(depth)).into_bytes();
            let objects = nested(depth, r#"{"a":"#, "1", "}");
            let usage_arrays = nested(depth, "[", "", "]");
            agree(&[&arrays, &objects, &usage_arrays]);
            assert_eq!(by_value(&arrays).is_some(), depth <= 127, "depth {depth}");
        }
        // Far deeper input stops at the limit rather than recursing on.
        let deep = "[".repeat(100_000).into_bytes();
        agree(&[&deep]);
    }

    /// Rough cost of one read, against serde_json `Value` lookups, for a typical body and a
    /// typical SSE chunk. Run with
    /// `cargo test -p gateway --release --lib response -- --ignored --nocapture`.
    #[test]
    #[ignore]
    fn envelope_parse_timing() {
        const BODY: &[u8] = br#"{"id":"chatcmpl-fixed","object":"chat.completion","created":0,"model":"fixed","choices":[{"index":0,"message":{"role":"assistant","content":"ok"},"finish_reason":"stop"}],"usage":{"prompt_tokens":8,"completion_tokens":1,"total_tokens":9,"prompt_tokens_details":{"cached_tokens":0}}}"#;
        const CHUNK: &[u8] = br#"{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1700000000,"model":"m","choices":[{"index":0,"delta":{"content":"Hello"},"finish_reason":null}]}"#;
        const ROUNDS: u32 = 200_000;
        let time = |doc: &[u8], read: &dyn Fn(&[u8]) -> bool| {
            let start = std::time::Instant::now();
            for _ in 0..ROUNDS {
                assert!(read(std::hint::black_box(doc)));
            }
            start.elapsed() / ROUNDS
        };
        for (name, doc) in [("body", BODY), ("chunk", CHUNK)] {
            let scanner = time(doc, &|b| Envelope::parse(b).is_some());
            let value = time(doc, &|b| by_value(b).is_some());
            eprintln!(
                "{name} ({} bytes): scanner {scanner:?}, Value {value:?}",
                doc.len()
            );
        }
    }
}

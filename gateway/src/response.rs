//! Watching a response as it passes through (never delaying it): usage for settling token
//! reservations and cache metrics, and whether an SSE stream ended with `[DONE]`.

use crate::replicas::client::LineSplitter;
use serde_json::Value;

/// Largest non-streaming body kept for usage parsing.
const MAX_JSON_BYTES: usize = 8 << 20;

/// Token usage as the replica reported it (or as estimated when it did not).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Usage {
    /// Prompt tokens.
    pub prompt_tokens: u64,
    /// Generated tokens.
    pub completion_tokens: u64,
    /// `usage.prompt_tokens_details.cached_tokens`, when reported.
    pub cached_tokens: Option<u64>,
}

/// Observes one response body.
#[derive(Default)]
pub struct ResponseTracker {
    stream: bool,
    lines: LineSplitter,
    json: Vec<u8>,
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

fn parse_usage(v: &Value) -> Option<Usage> {
    let u = v.get("usage")?;
    if u.is_null() {
        return None;
    }
    Some(Usage {
        prompt_tokens: u.get("prompt_tokens").and_then(Value::as_u64).unwrap_or(0),
        completion_tokens: u
            .get("completion_tokens")
            .and_then(Value::as_u64)
            .unwrap_or(0),
        cached_tokens: u
            .pointer("/prompt_tokens_details/cached_tokens")
            .and_then(Value::as_u64),
    })
}

impl ResponseTracker {
    /// A tracker for an SSE (`stream`) or JSON body.
    pub fn new(stream: bool) -> Self {
        Self {
            stream,
            ..Default::default()
        }
    }

    /// Feeds one body chunk.
    pub fn observe(&mut self, chunk: &[u8]) {
        if !self.stream {
            if self.json.len() + chunk.len() <= MAX_JSON_BYTES {
                self.json.extend_from_slice(chunk);
            } else {
                self.overflow = true;
            }
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
            let Ok(v) = serde_json::from_slice::<Value>(data) else {
                continue;
            };
            if v.get("error").is_some() {
                self.saw_error = true;
            }
            if let Some(u) = parse_usage(&v) {
                self.usage = Some(u);
            }
            if let Some(choices) = v.get("choices").and_then(Value::as_array) {
                self.content_chunks += choices.len() as u64;
            }
        }
    }

    /// Parses the collected JSON body (non-streaming) once it is complete.
    pub fn finish(&mut self) {
        if self.stream || self.overflow || self.json.is_empty() {
            return;
        }
        if let Ok(v) = serde_json::from_slice::<Value>(&self.json) {
            self.usage = parse_usage(&v);
            self.saw_error = v.get("error").is_some();
        }
        self.json = Vec::new();
    }

    /// True once a stream has sent `data: [DONE]`.
    pub fn saw_done(&self) -> bool {
        self.saw_done
    }

    /// True when the upstream sent an error event/body.
    pub fn saw_error(&self) -> bool {
        self.saw_error
    }

    /// Reported usage, if any.
    pub fn usage(&self) -> Option<Usage> {
        self.usage
    }

    /// Tokens to charge: reported usage, else `prompt_tokens` plus one per content chunk.
    pub fn charged_tokens(&self, prompt_tokens: u64) -> u64 {
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
        t.observe(b"data: {\"choices\":[{\"delta\":{\"content\":\"a\"}}]}\n\nda");
        t.observe(b"ta: {\"choices\":[],\"usage\":{\"prompt_tokens\":10,\"completion_tokens\":2,");
        assert!(!t.saw_done());
        t.observe(b"\"prompt_tokens_details\":{\"cached_tokens\":8}}}\n\ndata: [DONE]\n\n");
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
        t.observe(
            b"data: {\"choices\":[{\"delta\":{}}]}\n\ndata: {\"choices\":[{\"delta\":{}}]}\n\n",
        );
        assert_eq!(t.charged_tokens(5), 7);
        t.observe(b"data: {\"error\":{\"message\":\"x\"}}\n\n");
        assert!(t.saw_error());
        assert!(!t.saw_done());
    }

    #[test]
    fn json_usage_is_parsed_at_finish() {
        let mut t = ResponseTracker::new(false);
        t.observe(br#"{"choices":[],"usage":{"prompt_tokens":3,"#);
        t.observe(br#""completion_tokens":4}}"#);
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
}

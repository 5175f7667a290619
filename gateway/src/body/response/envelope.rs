//! The fields of a response the gateway reads (its envelope: `usage`, `error`, the number
//! of `choices`), read forward in one pass from an SSE chunk or a body, and a complete
//! body's `usage` read from its tail (see [`crate::body::tail::last_members`]).

use crate::body::scan::Scanner;
use crate::body::tail::last_members;

/// Token usage as the replica reported it (or as estimated when it did not).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Usage {
    /// Prompt tokens.
    pub prompt_tokens: u64,
    /// Generated tokens.
    pub completion_tokens: u64,
    /// `usage.prompt_tokens_details.cached_tokens`, when reported; otherwise llama.cpp's
    /// `timings.cache_n` (prompt tokens taken from its slot's cache), when reported.
    pub cached_tokens: Option<u64>,
}

/// The fields of a response object (or of one SSE chunk) the gateway reads: `usage`,
/// whether `error` is present, and how many `choices` there are. Read in one pass over the
/// bytes with no allocation (see [`crate::body::scan`]), exactly as `serde_json::Value` lookups read
/// them: the last of duplicate keys wins, and a field of an unexpected type reads as absent
/// (or zero), never as a failed parse.
#[derive(Default)]
pub(super) struct Envelope {
    pub(super) usage: Option<Usage>,
    pub(super) error: bool,
    pub(super) choices: u64,
}

impl Envelope {
    /// `None` when `bytes` is not one JSON document (as `serde_json::from_slice` decides);
    /// a document that is not an object has none of the fields.
    pub(super) fn parse(bytes: &[u8]) -> Option<Self> {
        Scanner::document(bytes, |s| match s.peek() {
            Some(b'{') => Self::read(s),
            _ => s.skip_value().map(|()| Self::default()),
        })
    }

    /// The fields of the top-level object.
    fn read(s: &mut Scanner<'_>) -> Option<Self> {
        let mut env = Self::default();
        let mut cache_n = None;
        s.object(|s, key| {
            if key.is(b"usage") {
                env.usage = read_usage(s)?;
            } else if key.is(b"timings") {
                cache_n = read_count_in(s, b"cache_n")?;
            } else if key.is(b"error") {
                env.error = true;
                s.skip_value()?;
            } else if key.is(b"choices") {
                env.choices = s.array_len()?;
            } else {
                s.skip_value()?;
            }
            Some(())
        })?;
        if let Some(u) = env.usage.as_mut() {
            u.cached_tokens = u.cached_tokens.or(cache_n);
        }
        Some(env)
    }
}

/// The `usage` of a complete non-streaming body, as a `serde_json::Value` lookup reads it
/// from a valid document. The members are walked from the end (usage is last, or nearly,
/// in the bodies OpenAI-compatible servers send), so the members in front of it are not
/// validated: a body whose tail is a well-formed usage object reads as that usage even if
/// something earlier is broken (the client gets the body as it came either way). A body
/// the backward walk cannot read is scanned forward, strictly.
pub(super) fn body_usage(body: &[u8]) -> Option<Usage> {
    tail_usage(body).unwrap_or_else(|| Envelope::parse(body).and_then(|e| e.usage))
}

/// [`body_usage`] read backwards; `None` when the walk cannot read the tail.
fn tail_usage(body: &[u8]) -> Option<Option<Usage>> {
    let [usage] = last_members(body, 0..body.len(), [b"usage"])?;
    let Some(usage) = usage else {
        return Some(None);
    };
    // Read as the forward scanner reads a count (`Value::as_u64`).
    let count = |range: Option<std::ops::Range<usize>>| {
        Scanner::document(body.get(range?)?, Scanner::u64_value).flatten()
    };
    // llama.cpp's `timings.cache_n`, looked for only when `usage` has no `cached_tokens`
    // (the walk to find a member that is absent goes over the whole body).
    let cache_n = || {
        let [t] = last_members(body, 0..body.len(), [b"timings"])?;
        let t = t.filter(|t| body.get(t.start) == Some(&b'{'))?;
        let [n] = last_members(body, t, [b"cache_n"])?;
        count(n)
    };
    // A valid document's value: `null`, an object, or anything else (which counts zero).
    match body.get(usage.start)? {
        b'n' => Some(None),
        b'{' => {
            const NAMES: [&[u8]; 3] = [
                b"prompt_tokens",
                b"completion_tokens",
                b"prompt_tokens_details",
            ];
            let [prompt, completion, details] = last_members(body, usage, NAMES)?;
            let cached = match details {
                Some(d) if body.get(d.start) == Some(&b'{') => {
                    let [cached] = last_members(body, d, [b"cached_tokens"])?;
                    count(cached)
                }
                _ => None,
            };
            Some(Some(Usage {
                prompt_tokens: count(prompt).unwrap_or(0),
                completion_tokens: count(completion).unwrap_or(0),
                cached_tokens: cached.or_else(cache_n),
            }))
        }
        _ => Some(Some(Usage::default())),
    }
}

/// `usage`: `null` is no usage; an object gives its counts; anything else counts zero.
fn read_usage(s: &mut Scanner<'_>) -> Option<Option<Usage>> {
    match s.peek()? {
        b'n' => s.literal(b"null").map(|()| None),
        b'{' => {
            let mut u = Usage::default();
            s.object(|s, key| {
                if key.is(b"prompt_tokens") {
                    u.prompt_tokens = s.u64_value()?.unwrap_or(0);
                } else if key.is(b"completion_tokens") {
                    u.completion_tokens = s.u64_value()?.unwrap_or(0);
                } else if key.is(b"prompt_tokens_details") {
                    u.cached_tokens = read_cached_tokens(s)?;
                } else {
                    s.skip_value()?;
                }
                Some(())
            })?;
            Some(Some(u))
        }
        _ => s.skip_value().map(|()| Some(Usage::default())),
    }
}

/// `prompt_tokens_details`: its `cached_tokens`, when it is an object holding a count.
fn read_cached_tokens(s: &mut Scanner<'_>) -> Option<Option<u64>> {
    read_count_in(s, b"cached_tokens")
}

/// The count under `name` in the object at the scanner, when it is an object holding one.
fn read_count_in(s: &mut Scanner<'_>, name: &[u8]) -> Option<Option<u64>> {
    if s.peek()? != b'{' {
        return s.skip_value().map(|()| None);
    }
    let mut found = None;
    s.object(|s, key| {
        if key.is(name) {
            found = s.u64_value()?;
        } else {
            s.skip_value()?;
        }
        Some(())
    })?;
    Some(found)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_openai_body_is_read_from_its_tail() {
        let body = br#"{"id":"chatcmpl-fixed","object":"chat.completion","created":0,"model":"fixed","choices":[{"index":0,"message":{"role":"assistant","content":"ok"},"finish_reason":"stop"}],"usage":{"prompt_tokens":8,"completion_tokens":1,"total_tokens":9,"prompt_tokens_details":{"cached_tokens":0}}}"#;
        let want = Usage {
            prompt_tokens: 8,
            completion_tokens: 1,
            cached_tokens: Some(0),
        };
        assert_eq!(tail_usage(body), Some(Some(want)));
    }

    #[test]
    fn llamacpp_cache_n_stands_in_for_cached_tokens() {
        // llama-server's shape: `usage` without details, `timings` after it.
        let body = br#"{"choices":[{"finish_reason":"length","index":0,"message":{"role":"assistant","content":"Hi"}}],"created":1,"model":"m","object":"chat.completion","usage":{"completion_tokens":2,"prompt_tokens":40,"total_tokens":42},"id":"chatcmpl-x","timings":{"cache_n":32,"prompt_n":8,"prompt_ms":1.5,"predicted_n":2}}"#;
        let want = Usage {
            prompt_tokens: 40,
            completion_tokens: 2,
            cached_tokens: Some(32),
        };
        assert_eq!(tail_usage(body), Some(Some(want)));
        assert_eq!(Envelope::parse(body).and_then(|e| e.usage), Some(want));
        // An explicit cached_tokens wins over cache_n.
        let both = br#"{"usage":{"prompt_tokens":40,"completion_tokens":2,"prompt_tokens_details":{"cached_tokens":16}},"timings":{"cache_n":32}}"#;
        assert_eq!(body_usage(both).unwrap().cached_tokens, Some(16));
        assert_eq!(
            Envelope::parse(both).unwrap().usage.unwrap().cached_tokens,
            Some(16)
        );
        // Without either, none.
        let neither =
            br#"{"usage":{"prompt_tokens":40,"completion_tokens":2},"timings":{"prompt_n":40}}"#;
        assert_eq!(body_usage(neither).unwrap().cached_tokens, None);
    }

    /// Run under callgrind to count instructions per read (not a pass/fail check).
    #[test]
    #[ignore = "an instruction-count experiment"]
    fn tail_read_cost() {
        let body = br#"{"id":"chatcmpl-fixed","object":"chat.completion","created":0,"model":"fixed","choices":[{"index":0,"message":{"role":"assistant","content":"ok"},"finish_reason":"stop"}],"usage":{"prompt_tokens":8,"completion_tokens":1,"total_tokens":9,"prompt_tokens_details":{"cached_tokens":0}}}"#;
        let mut n = 0;
        for _ in 0..10_000 {
            n += body_usage(std::hint::black_box(body)).map_or(0, |u| u.prompt_tokens);
        }
        assert_eq!(n, 80_000);
    }
}

//! Watching a response as it passes through (never delaying it): usage for settling token
//! reservations and cache metrics, and whether an SSE stream ended with `[DONE]`.

use crate::replicas::client::LineSplitter;
use serde::de::{Deserialize, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};

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

/// Visitor methods that answer `$value` for the listed kinds (scalars; `seq` and `map` are
/// skipped over without being built).
macro_rules! other_values {
    ($ty:ty, $value:expr, $($kind:ident),*) => {
        $(other_values!(@one $ty, $value, $kind);)*
    };
    (@one $ty:ty, $value:expr, bool) => { fn visit_bool<E>(self, _: bool) -> Result<$ty, E> { Ok($value) } };
    (@one $ty:ty, $value:expr, i64) => { fn visit_i64<E>(self, _: i64) -> Result<$ty, E> { Ok($value) } };
    (@one $ty:ty, $value:expr, u64) => { fn visit_u64<E>(self, _: u64) -> Result<$ty, E> { Ok($value) } };
    (@one $ty:ty, $value:expr, f64) => { fn visit_f64<E>(self, _: f64) -> Result<$ty, E> { Ok($value) } };
    (@one $ty:ty, $value:expr, str) => { fn visit_str<E>(self, _: &str) -> Result<$ty, E> { Ok($value) } };
    (@one $ty:ty, $value:expr, unit) => { fn visit_unit<E>(self) -> Result<$ty, E> { Ok($value) } };
    (@one $ty:ty, $value:expr, seq) => {
        fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<$ty, A::Error> {
            while seq.next_element::<IgnoredAny>()?.is_some() {}
            Ok($value)
        }
    };
    (@one $ty:ty, $value:expr, map) => {
        fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<$ty, A::Error> {
            while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
            Ok($value)
        }
    };
}

/// The fields of a response object (or of one SSE chunk) the gateway reads: `usage`,
/// whether `error` is present, and how many `choices` there are. Everything else is skipped
/// without being built, so reading usage costs one pass over the bytes and no allocation.
/// Lenient the way `serde_json::Value` lookups are: a field of an unexpected type reads as
/// absent (or zero), never as a failed parse.
#[derive(Default)]
struct Envelope {
    usage: Option<Usage>,
    error: bool,
    choices: u64,
}

impl Envelope {
    fn parse(bytes: &[u8]) -> Option<Self> {
        let mut de = serde_json::Deserializer::from_slice(bytes);
        let env = de.deserialize_any(EnvelopeVisitor).ok()?;
        de.end().ok()?;
        Some(env)
    }
}

/// Keys of an object, borrowed when they have no escapes.
struct Key<'a>(std::borrow::Cow<'a, str>);

impl<'de> Deserialize<'de> for Key<'de> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Key<'de>;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a key")
            }
            fn visit_borrowed_str<E>(self, v: &'de str) -> Result<Key<'de>, E> {
                Ok(Key(v.into()))
            }
            fn visit_str<E>(self, v: &str) -> Result<Key<'de>, E> {
                Ok(Key(v.to_string().into()))
            }
        }
        d.deserialize_str(V)
    }
}

struct EnvelopeVisitor;

impl<'de> Visitor<'de> for EnvelopeVisitor {
    type Value = Envelope;
    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("a JSON value")
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Envelope, A::Error> {
        let mut env = Envelope::default();
        while let Some(Key(k)) = map.next_key::<Key<'de>>()? {
            match k.as_ref() {
                "usage" => env.usage = map.next_value::<UsageField>()?.0,
                "error" => {
                    map.next_value::<IgnoredAny>()?;
                    env.error = true;
                }
                "choices" => env.choices = map.next_value::<SeqLen>()?.0,
                _ => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        Ok(env)
    }
    // Any other JSON value carries no usage.
    other_values!(
        Envelope,
        Envelope::default(),
        seq,
        bool,
        i64,
        u64,
        f64,
        str,
        unit
    );
}

/// `usage`: `null` is no usage; an object gives its counts; anything else counts zero.
struct UsageField(Option<Usage>);

impl<'de> Deserialize<'de> for UsageField {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = UsageField;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("usage")
            }
            other_values!(UsageField, UsageField(None), unit);
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<UsageField, A::Error> {
                let mut u = Usage::default();
                while let Some(Key(k)) = map.next_key::<Key<'de>>()? {
                    match k.as_ref() {
                        "prompt_tokens" => {
                            u.prompt_tokens = map.next_value::<MaybeU64>()?.0.unwrap_or(0)
                        }
                        "completion_tokens" => {
                            u.completion_tokens = map.next_value::<MaybeU64>()?.0.unwrap_or(0)
                        }
                        "prompt_tokens_details" => {
                            u.cached_tokens = map.next_value::<CachedField>()?.0
                        }
                        _ => {
                            map.next_value::<IgnoredAny>()?;
                        }
                    }
                }
                Ok(UsageField(Some(u)))
            }
            other_values!(
                UsageField,
                UsageField(Some(Usage::default())),
                seq,
                bool,
                i64,
                u64,
                f64,
                str
            );
        }
        d.deserialize_any(V)
    }
}

/// `prompt_tokens_details`: its `cached_tokens`, when it is an object holding a count.
struct CachedField(Option<u64>);

impl<'de> Deserialize<'de> for CachedField {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = CachedField;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("prompt_tokens_details")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<CachedField, A::Error> {
                let mut cached = None;
                while let Some(Key(k)) = map.next_key::<Key<'de>>()? {
                    if k == "cached_tokens" {
                        cached = map.next_value::<MaybeU64>()?.0;
                    } else {
                        map.next_value::<IgnoredAny>()?;
                    }
                }
                Ok(CachedField(cached))
            }
            other_values!(
                CachedField,
                CachedField(None),
                seq,
                unit,
                bool,
                i64,
                u64,
                f64,
                str
            );
        }
        d.deserialize_any(V)
    }
}

/// A non-negative integer, or `None` for any other value (as `Value::as_u64` reads it).
struct MaybeU64(Option<u64>);

impl<'de> Deserialize<'de> for MaybeU64 {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = MaybeU64;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a count")
            }
            fn visit_u64<E>(self, v: u64) -> Result<MaybeU64, E> {
                Ok(MaybeU64(Some(v)))
            }
            fn visit_i64<E>(self, v: i64) -> Result<MaybeU64, E> {
                Ok(MaybeU64(u64::try_from(v).ok()))
            }
            other_values!(MaybeU64, MaybeU64(None), f64, bool, str, unit, map, seq);
        }
        d.deserialize_any(V)
    }
}

/// The length of an array; 0 for any other value.
struct SeqLen(u64);

impl<'de> Deserialize<'de> for SeqLen {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = SeqLen;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("choices")
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<SeqLen, A::Error> {
                let mut n = 0;
                while seq.next_element::<IgnoredAny>()?.is_some() {
                    n += 1;
                }
                Ok(SeqLen(n))
            }
            other_values!(SeqLen, SeqLen(0), map, unit, bool, i64, u64, f64, str);
        }
        d.deserialize_any(V)
    }
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
    pub fn finish(&mut self) {
        if self.stream || self.overflow || self.json.is_empty() {
            return;
        }
        if let Some(env) = Envelope::parse(&self.json) {
            self.usage = env.usage;
            self.saw_error = env.error;
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

    /// The reference reading: a `serde_json::Value`, looked up field by field.
    fn by_value(bytes: &[u8]) -> Option<(Option<Usage>, bool, u64)> {
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
}

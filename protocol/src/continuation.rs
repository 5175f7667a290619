//! Stream migration between Warmpath replicas: what a replica tells the gateway about the
//! tokens behind each SSE event, and the request field with which another replica
//! continues a stream exactly where the first one stopped.
//!
//! When the gateway sends [`HEADER_STREAM_TOKENS`], a replica's stream carries, as the
//! first line of each event that has text, an SSE comment (clients ignore comments; the
//! gateway strips them before the client sees the event):
//!
//! ```text
//! : warmpath-tokens 17 791,3021
//! data: {...}
//! ```
//!
//! `17`: bytes of completion text sent so far, this event included; `791,3021`: the ids
//! of the tokens generated since the previous such comment. The event that carries the
//! `finish_reason` is marked with `: warmpath-end`, and a continuation replaying the
//! carried tokens sends `: warmpath-replay` events as a sign of life. A continuation
//! request carries those ids and that byte count back ([`Continuation`]).

use serde::{Deserialize, Serialize};

/// Request header, gateway to Warmpath replica: "tag your SSE events with their tokens".
pub const HEADER_STREAM_TOKENS: &str = "x-warmpath-stream-tokens";

/// The comment that tags an event with its tokens (followed by ` <bytes> <ids>`).
pub const TOKENS_COMMENT: &[u8] = b": warmpath-tokens";
/// The comment that marks the event with the `finish_reason`.
pub const END_COMMENT: &[u8] = b": warmpath-end";
/// A comment-only event a continuation sends while it replays the carried tokens (every
/// few tokens), so a long replay is not taken for a silent replica.
pub const REPLAY_COMMENT: &[u8] = b": warmpath-replay";
/// What every line of this protocol starts with (the gateway strips them all).
pub const COMMENT_PREFIX: &[u8] = b": warmpath-";

/// The body field (both completion endpoints) of a continuation request. Only the
/// gateway sends it: a client's is refused at the gateway.
pub const FIELD: &str = "warmpath_continuation";

/// Where a migrated stream resumes: the tokens the first replica generated and the
/// client holds, how much of their text it holds, and the sampler's position.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Continuation {
    /// Ids already generated, in order (they extend the prompt).
    pub tokens: Vec<u32>,
    /// Bytes of their decoded text already sent (the rest is still to be sent).
    pub text_bytes: u64,
    /// Random draws the sampler already took; absent: one per token when the request
    /// samples at random (temperature above 0, `top_k` not 1), else none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rng_draws: Option<u64>,
}

/// The tag line of an event (without its `\n`): `: warmpath-tokens <bytes> <ids>`.
pub fn tokens_comment(text_bytes: u64, ids: &[u32]) -> String {
    let mut s = String::with_capacity(24 + ids.len() * 6);
    s.push_str(": warmpath-tokens ");
    s.push_str(&text_bytes.to_string());
    s.push(' ');
    for (i, id) in ids.iter().enumerate() {
        if i > 0 {
            s.push(',');
        }
        s.push_str(&id.to_string());
    }
    s
}

/// Reads a tag line (without its `\n`): the sent byte count and the ids, appended to
/// `ids`; `None` when the line is not a well-formed tag.
pub fn parse_tokens_comment(line: &[u8], ids: &mut Vec<u32>) -> Option<u64> {
    let rest = line.strip_prefix(TOKENS_COMMENT)?.strip_prefix(b" ")?;
    let rest = std::str::from_utf8(rest).ok()?.trim_end_matches('\r');
    let (bytes, list) = rest.split_once(' ').unwrap_or((rest, ""));
    let bytes = bytes.parse().ok()?;
    let start = ids.len();
    for id in list.split(',').filter(|s| !s.is_empty()) {
        match id.parse() {
            Ok(v) => ids.push(v),
            Err(_) => {
                ids.truncate(start);
                return None;
            }
        }
    }
    Some(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tag_reads_back_as_written() {
        let line = tokens_comment(17, &[791, 3021]);
        assert_eq!(line, ": warmpath-tokens 17 791,3021");
        let mut ids = vec![5];
        assert_eq!(parse_tokens_comment(line.as_bytes(), &mut ids), Some(17));
        assert_eq!(ids, [5, 791, 3021]);
        let empty = tokens_comment(0, &[]);
        assert_eq!(parse_tokens_comment(empty.as_bytes(), &mut ids), Some(0));
        assert_eq!(ids.len(), 3);
    }

    #[test]
    fn a_broken_tag_adds_nothing() {
        let mut ids = Vec::new();
        for bad in [
            &b": warmpath-tokens x 1,2"[..],
            b": warmpath-tokens 3 1,z",
            b": warmpath-tokensX 3 1",
            b"data: {}",
        ] {
            assert_eq!(parse_tokens_comment(bad, &mut ids), None);
            assert!(ids.is_empty());
        }
    }

    #[test]
    fn the_field_is_strict() {
        let c: Continuation = serde_json::from_str(r#"{"tokens":[1,2],"text_bytes":3}"#).unwrap();
        assert_eq!(c.rng_draws, None);
        assert!(
            serde_json::from_str::<Continuation>(r#"{"tokens":[],"text_bytes":0,"x":1}"#).is_err()
        );
    }
}

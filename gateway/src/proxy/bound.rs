//! The completion bound the replica gets: a request without `max_tokens` reserves
//! `limits.default_max_tokens` against its tenant's token limit, so the body forwarded
//! upstream must carry that bound too, or the replica would generate up to the rest of
//! its context ([`bounded_body`]). The rewritten body replaces the client's on every
//! attempt ([`super::send::body`]), framed by its own `Content-Length`.

use crate::body::request::Endpoint;
use crate::body::tail::last_members;
use bytes::Bytes;

/// `body` with its completion bound set to `max_tokens`, for a body that was parsed
/// (valid JSON, no duplicate keys) and holds no bound: every bound member present is
/// `null` and gets the value; with none present `"max_tokens"` is added as the object's
/// first member (both endpoints read it; chat reads `max_completion_tokens` first). `None`
/// when the body is not an object the rewrite can read (never for a parsed body).
pub(crate) fn bounded_body(body: &[u8], endpoint: Endpoint, max_tokens: u32) -> Option<Bytes> {
    let value = itoa::Buffer::new().format(max_tokens).as_bytes().to_vec();
    let names: [&[u8]; 2] = match endpoint {
        Endpoint::Chat => [b"max_tokens", b"max_completion_tokens"],
        // A completion reads only `max_tokens`; the second name is never a member it reads.
        Endpoint::Completions | Endpoint::Passthrough(_) => [b"max_tokens", b"max_tokens"],
    };
    let found = last_members(body, 0..body.len(), names)?;
    let mut nulls: Vec<std::ops::Range<usize>> = found.into_iter().flatten().collect();
    nulls.sort_by_key(|r| r.start);
    nulls.dedup();
    let mut out = Vec::with_capacity(body.len() + 24);
    if nulls.is_empty() {
        let open = body.iter().position(|&b| b == b'{')?;
        out.extend_from_slice(&body[..=open]);
        out.extend_from_slice(b"\"max_tokens\":");
        out.extend_from_slice(&value);
        out.push(b',');
        out.extend_from_slice(&body[open + 1..]);
    } else {
        let mut at = 0;
        for r in nulls {
            if body.get(r.clone())? != b"null" {
                return None;
            }
            out.extend_from_slice(&body[at..r.start]);
            out.extend_from_slice(&value);
            at = r.end;
        }
        out.extend_from_slice(&body[at..]);
    }
    Some(Bytes::from(out))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::body::request::parse;

    fn bound(endpoint: Endpoint, body: &str) -> String {
        let out = bounded_body(body.as_bytes(), endpoint, 256).expect("rewritten");
        let p = parse(endpoint, &out).expect("the rewritten body parses");
        assert_eq!(p.max_tokens, Some(256), "{}", String::from_utf8_lossy(&out));
        String::from_utf8(out.to_vec()).unwrap_or_default()
    }

    #[test]
    fn an_absent_bound_is_added_for_both_endpoints() {
        let chat = r#"{"model":"m","messages":[{"role":"user","content":"hi"}]}"#;
        assert_eq!(
            bound(Endpoint::Chat, chat),
            r#"{"max_tokens":256,"model":"m","messages":[{"role":"user","content":"hi"}]}"#
        );
        let text = " \n{ \"model\":\"m\",\"prompt\":\"hi\" } ";
        assert_eq!(
            bound(Endpoint::Completions, text),
            " \n{\"max_tokens\":256, \"model\":\"m\",\"prompt\":\"hi\" } "
        );
    }

    #[test]
    fn a_null_bound_gets_the_value_in_place() {
        let chat = r#"{"model":"m","max_tokens":null,"messages":[{"role":"user","content":"x"}],"max_completion_tokens" : null}"#;
        assert_eq!(
            bound(Endpoint::Chat, chat),
            r#"{"model":"m","max_tokens":256,"messages":[{"role":"user","content":"x"}],"max_completion_tokens" : 256}"#
        );
        let text = r#"{"model":"m","prompt":"max_tokens","max_tokens":null}"#;
        assert_eq!(
            bound(Endpoint::Completions, text),
            r#"{"model":"m","prompt":"max_tokens","max_tokens":256}"#
        );
        // A chat's `max_completion_tokens` alone, null: the bound goes there.
        let chat = r#"{"model":"m","messages":[{"role":"user","content":"x"}],"max_completion_tokens":null}"#;
        assert!(bound(Endpoint::Chat, chat).ends_with(r#""max_completion_tokens":256}"#));
    }
}

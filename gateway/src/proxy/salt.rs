//! The tenant's salt as vLLM's `cache_salt` request field, for a pool with
//! `cache_salt: per_tenant` (`crate::engines::namespace`). vLLM hashes it into the first
//! block of the request's prompt, so tenants never share its cached blocks. A client's own
//! `cache_salt` never gets this far: the body reader refuses it (400), so the gateway's
//! value is the only one and no client can pick another tenant's salt.

use bytes::Bytes;
use warmpath_core::CacheSalt;

/// `body` (a parsed JSON object without `cache_salt`) with `"cache_salt": salt` added as
/// its first member. `None` when there is no object to add it to (never for a parsed body).
pub(crate) fn salted_body(body: &[u8], salt: &CacheSalt) -> Option<Bytes> {
    let open = body.iter().position(|&b| b == b'{')?;
    let value = serde_json::to_string(salt.as_str()).ok()?;
    let mut out = Vec::with_capacity(body.len() + value.len() + 14);
    out.extend_from_slice(&body[..=open]);
    out.extend_from_slice(b"\"cache_salt\":");
    out.extend_from_slice(value.as_bytes());
    // An empty object gets no separator.
    let rest = &body[open + 1..];
    if rest.iter().find(|b| !b.is_ascii_whitespace()) != Some(&b'}') {
        out.push(b',');
    }
    out.extend_from_slice(rest);
    Some(Bytes::from(out))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::body::request::{parse, Endpoint};

    #[test]
    fn the_salt_is_added_and_the_body_still_parses_as_before() {
        let salt = CacheSalt::new("0f1e\"2d");
        let body = br#" {"model":"m","max_tokens":3,"messages":[{"role":"user","content":"hi"}]}"#;
        let out = salted_body(body, &salt).unwrap();
        let v: serde_json::Value = serde_json::from_slice(&out).unwrap();
        assert_eq!(v["cache_salt"], "0f1e\"2d");
        assert_eq!(v["model"], "m");
        let before = serde_json::from_slice::<serde_json::Value>(body).unwrap();
        assert_eq!(
            v.as_object().unwrap().len(),
            before.as_object().unwrap().len() + 1
        );
        // The gateway's reader refuses a client's `cache_salt`: the salted body is for the
        // engine only, and the original parses.
        assert!(parse(Endpoint::Chat, body).is_ok());
        assert!(parse(Endpoint::Chat, &out).is_err());
        assert_eq!(
            &salted_body(b"{ }", &salt).unwrap()[..],
            br#"{"cache_salt":"0f1e\"2d" }"#
        );
        assert!(salted_body(b"[]", &salt).is_none());
    }
}

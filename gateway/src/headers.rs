//! Header names the gateway stamps, and stamping them cheaply.
//!
//! Pingora's `insert_header` keeps a second, case-preserving map next to the `http`
//! header map: every insert parses the name again, allocates it twice and hashes it into
//! both maps (about 1,100 instructions an insert, measured with callgrind; ten inserts a
//! proxied request). The gateway instead drops the case map once per message
//! ([`caseless_request`], [`caseless_response`]) and inserts prebuilt [`HeaderName`]s and
//! [`HeaderValue`]s straight into the `http` map. Header names are case-insensitive in
//! HTTP/1.1 (and lowercase in HTTP/2); on the wire Pingora then writes standard names in
//! their usual title case and other names in lowercase.

use http::header::{HeaderMap, HeaderName, HeaderValue};
use pingora_http::{RequestHeader, ResponseHeader};
use warmpath_protocol::replica_api::{
    HEADER_CACHE_SALT, HEADER_KV_TIER_OFF, HEADER_KV_TIER_TOKENS, HEADER_KV_TRANSFER,
    HEADER_KV_TRANSFER_REASON, HEADER_PREDICTED_CACHED, HEADER_PREFILL_FROM, HEADER_REPLICA,
};

/// `x-warmpath-cache-salt` (gateway to replica).
pub(crate) const CACHE_SALT: HeaderName = HeaderName::from_static(HEADER_CACHE_SALT);
/// `x-warmpath-prefill-from` (gateway to a decode replica; never from a client).
pub(crate) const PREFILL_FROM: HeaderName = HeaderName::from_static(HEADER_PREFILL_FROM);
/// `x-warmpath-kv-tier-off` (gateway to a replica; never from a client): the replica
/// neither reads nor writes its shared KV tier for the request (data residency).
pub(crate) const KV_TIER_OFF: HeaderName = HeaderName::from_static(HEADER_KV_TIER_OFF);
/// `x-warmpath-kv-transfer` (from a decode replica: how its KV fetch went).
pub(crate) const KV_TRANSFER: HeaderName = HeaderName::from_static(HEADER_KV_TRANSFER);
/// The gateway's signature of [`PREFILL_FROM`].
pub(crate) const PREFILL_AUTH: HeaderName =
    HeaderName::from_static(warmpath_protocol::transfer_auth::HEADER_PREFILL_AUTH);
/// Why the decode replica's KV transfer ended.
pub(crate) const KV_TRANSFER_REASON: HeaderName =
    HeaderName::from_static(HEADER_KV_TRANSFER_REASON);
/// `x-warmpath-kv-tier-tokens` (from a replica with the shared KV tier: prompt tokens it
/// loaded from the tier, counted among its cached tokens).
pub(crate) const KV_TIER_TOKENS: HeaderName = HeaderName::from_static(HEADER_KV_TIER_TOKENS);
/// `x-warmpath-replica` (to the client).
pub(crate) const REPLICA: HeaderName = HeaderName::from_static(HEADER_REPLICA);
/// `x-warmpath-predicted-cached-tokens` (to the client).
pub(crate) const PREDICTED_CACHED: HeaderName = HeaderName::from_static(HEADER_PREDICTED_CACHED);
/// `x-warmpath-stream-tokens` (gateway to Warmpath replica: tag events with their tokens,
/// for stream migration).
pub(crate) const STREAM_TOKENS: HeaderName =
    HeaderName::from_static(warmpath_protocol::continuation::HEADER_STREAM_TOKENS);
/// `x-request-id` (both ways).
pub(crate) const REQUEST_ID: HeaderName = HeaderName::from_static("x-request-id");
/// W3C `traceparent` (to the replica).
pub(crate) const TRACEPARENT: HeaderName = HeaderName::from_static("traceparent");
/// `x-ratelimit-limit-requests`.
pub(crate) const RATELIMIT_LIMIT_REQUESTS: HeaderName =
    HeaderName::from_static("x-ratelimit-limit-requests");
/// `x-ratelimit-remaining-requests`.
pub(crate) const RATELIMIT_REMAINING_REQUESTS: HeaderName =
    HeaderName::from_static("x-ratelimit-remaining-requests");
/// `x-ratelimit-reset-requests`.
pub(crate) const RATELIMIT_RESET_REQUESTS: HeaderName =
    HeaderName::from_static("x-ratelimit-reset-requests");
/// `x-ratelimit-limit-tokens`.
pub(crate) const RATELIMIT_LIMIT_TOKENS: HeaderName =
    HeaderName::from_static("x-ratelimit-limit-tokens");
/// `x-ratelimit-remaining-tokens`.
pub(crate) const RATELIMIT_REMAINING_TOKENS: HeaderName =
    HeaderName::from_static("x-ratelimit-remaining-tokens");
/// `x-ratelimit-reset-tokens`.
pub(crate) const RATELIMIT_RESET_TOKENS: HeaderName =
    HeaderName::from_static("x-ratelimit-reset-tokens");

/// Name/value pairs to add to a response.
pub(crate) type HeaderPairs = Vec<(HeaderName, HeaderValue)>;

/// The request's header map, with Pingora's case map dropped first (see the module doc).
/// The path must be valid UTF-8 (the gateway only forwards its own fixed API paths).
pub(crate) fn caseless_request(req: &mut RequestHeader) -> &mut HeaderMap {
    if req.has_case() {
        let empty = RequestHeader::from(http::Request::new(()).into_parts().0);
        let parts: http::request::Parts = std::mem::replace(req, empty).into();
        *req = RequestHeader::from(parts);
    }
    &mut req.headers
}

/// The response's header map, with Pingora's case map dropped first (see the module doc).
pub(crate) fn caseless_response(resp: &mut ResponseHeader) -> &mut HeaderMap {
    if resp.has_case() {
        let empty = ResponseHeader::from(http::Response::new(()).into_parts().0);
        let parts: http::response::Parts = std::mem::replace(resp, empty).into();
        *resp = ResponseHeader::from(parts);
    }
    &mut resp.headers
}

/// A header value from text the gateway produced (ids, formatted durations); an invalid
/// value (never produced in practice) becomes empty rather than failing the response.
pub(crate) fn text(s: &str) -> HeaderValue {
    HeaderValue::from_str(s).unwrap_or_else(|_| HeaderValue::from_static(""))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn wire_response(resp: &ResponseHeader) -> String {
        let mut buf = Vec::new();
        resp.header_to_h1_wire(&mut buf);
        String::from_utf8(buf).unwrap()
    }

    #[test]
    fn caseless_response_keeps_status_and_headers() {
        let mut resp = ResponseHeader::build(201, None).unwrap();
        resp.insert_header("Content-Type", "application/json")
            .unwrap();
        resp.insert_header("X-Upstream-Thing", "1").unwrap();
        let h = caseless_response(&mut resp);
        h.insert(REPLICA, HeaderValue::from_static("r3"));
        h.insert(PREDICTED_CACHED, HeaderValue::from(48u64));
        assert!(!resp.has_case());
        assert_eq!(resp.status.as_u16(), 201);
        let wire = wire_response(&resp);
        assert!(
            wire.contains("Content-Type: application/json\r\n"),
            "{wire}"
        );
        assert!(wire.contains("x-upstream-thing: 1\r\n"), "{wire}");
        assert!(wire.contains("x-warmpath-replica: r3\r\n"), "{wire}");
        assert!(
            wire.contains("x-warmpath-predicted-cached-tokens: 48\r\n"),
            "{wire}"
        );
        // Pingora's own inserts still work on the caseless header.
        resp.insert_header("connection", "close").unwrap();
        assert!(wire_response(&resp).contains("Connection: close\r\n"));
    }

    #[test]
    fn caseless_request_keeps_method_uri_and_replaces_values() {
        let mut req = RequestHeader::build("POST", b"/v1/chat/completions?x=1", None).unwrap();
        req.insert_header("Authorization", "Bearer k").unwrap();
        req.insert_header(HEADER_CACHE_SALT, "client-chosen")
            .unwrap();
        let h = caseless_request(&mut req);
        h.remove(http::header::AUTHORIZATION);
        h.insert(CACHE_SALT, HeaderValue::from_static("gateway-salt"));
        assert_eq!(req.method, http::Method::POST);
        assert_eq!(req.uri.path(), "/v1/chat/completions");
        assert_eq!(req.uri.query(), Some("x=1"));
        assert!(req.headers.get("authorization").is_none());
        let salts: Vec<_> = req.headers.get_all(HEADER_CACHE_SALT).iter().collect();
        assert_eq!(salts, vec!["gateway-salt"]);
        let mut buf = Vec::new();
        req.header_to_h1_wire(&mut buf);
        let wire = String::from_utf8(buf).unwrap();
        assert_eq!(wire, "x-warmpath-cache-salt: gateway-salt\r\n");
    }
}

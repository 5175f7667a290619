//! Who may use the admin listener, and how: the admin key (stored as its SHA-256, compared
//! in constant time) as a bearer token or through a dashboard login's session cookie; and,
//! on every state-changing request, a same-origin check and JSON-only bodies, so a browser
//! page on another site can neither forge a request nor smuggle one in as `text/plain`.
//!
//! The session cookie (`warmpath_admin`, `HttpOnly; SameSite=Strict`) holds an expiry and
//! an HMAC of it keyed by a secret drawn at start and the stored key hash: nothing is kept
//! per session, a restart logs every browser out, and changing the admin key (a reload)
//! invalidates every session at once.

use super::error::AdminError;
use crate::config::AdminConfig;
use hmac::{Hmac, Mac};
use http::{HeaderMap, Method};
use sha2::{Digest, Sha256};
use std::time::{SystemTime, UNIX_EPOCH};
use subtle::ConstantTimeEq;

/// Name of the dashboard's session cookie.
pub(crate) const COOKIE: &str = "warmpath_admin";

/// Issues and checks dashboard sessions.
pub(crate) struct Sessions {
    secret: [u8; 32],
}

impl Default for Sessions {
    fn default() -> Self {
        Self::new()
    }
}

impl Sessions {
    /// Sessions under a fresh random secret.
    pub(crate) fn new() -> Self {
        Self {
            secret: rand::random(),
        }
    }

    fn mac(&self, key_hash: &[u8; 32], expires: u64) -> [u8; 32] {
        let mut mac = <Hmac<Sha256> as Mac>::new_from_slice(&self.secret)
            .expect("HMAC accepts keys of any length");
        mac.update(b"warmpath.admin-session.v1\0");
        mac.update(key_hash);
        mac.update(&expires.to_be_bytes());
        mac.finalize().into_bytes().into()
    }

    /// A session token valid until `now + ttl_s` (Unix seconds).
    pub(crate) fn issue(&self, key_hash: &[u8; 32], now: u64, ttl_s: u64) -> String {
        let expires = now.saturating_add(ttl_s);
        format!("{expires}.{}", hex::encode(self.mac(key_hash, expires)))
    }

    /// Whether `token` is a session of `key_hash` that has not expired at `now`.
    pub(crate) fn verify(&self, key_hash: &[u8; 32], token: &str, now: u64) -> bool {
        let Some((expires, tag)) = token.split_once('.') else {
            return false;
        };
        let (Ok(expires), Ok(tag)) = (expires.parse::<u64>(), hex::decode(tag)) else {
            return false;
        };
        expires > now && bool::from(self.mac(key_hash, expires).as_slice().ct_eq(&tag))
    }
}

/// Unix seconds now.
pub(crate) fn unix_now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// The configured key hash; `None` when the admin listener is open (no key configured).
pub(crate) fn stored_hash(cfg: &AdminConfig) -> Option<[u8; 32]> {
    let h = hex::decode(cfg.key_sha256.as_ref()?).ok()?;
    // A validated config holds 64 hex digits; anything else locks everyone out.
    Some(<[u8; 32]>::try_from(h.as_slice()).unwrap_or([0; 32]))
}

/// Whether `key` is the admin key (constant-time comparison of SHA-256 digests).
pub(crate) fn key_matches(stored: &[u8; 32], key: &str) -> bool {
    let digest: [u8; 32] = Sha256::digest(key.as_bytes()).into();
    bool::from(stored.ct_eq(&digest))
}

/// The value of cookie `name`, across every `Cookie` header.
fn cookie<'a>(headers: &'a HeaderMap, name: &str) -> Option<&'a str> {
    headers
        .get_all(http::header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .find_map(|kv| {
            let (k, v) = kv.trim().split_once('=')?;
            (k == name).then_some(v)
        })
}

/// Checks the admin key (bearer token) or a dashboard session cookie; always passes when no
/// key is configured.
pub(crate) fn authenticate(
    cfg: &AdminConfig,
    sessions: &Sessions,
    headers: &HeaderMap,
) -> Result<(), AdminError> {
    let Some(stored) = stored_hash(cfg) else {
        return Ok(());
    };
    if let Some(v) = headers
        .get(http::header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
    {
        if let Some((scheme, key)) = v.split_once(' ') {
            if scheme.eq_ignore_ascii_case("bearer") && key_matches(&stored, key.trim()) {
                return Ok(());
            }
        }
    }
    if let Some(token) = cookie(headers, COOKIE) {
        if sessions.verify(&stored, token, unix_now()) {
            return Ok(());
        }
    }
    Err(AdminError::Unauthorized)
}

/// Whether `method` may change state (everything but GET, HEAD and OPTIONS).
pub(crate) fn changes_state(method: &Method) -> bool {
    !matches!(*method, Method::GET | Method::HEAD | Method::OPTIONS)
}

/// Same-origin and JSON-only checks for a state-changing request: a browser's `Origin`
/// (or `Sec-Fetch-Site`) must be this listener's own, and a body must be
/// `application/json` (a cross-site page can send `text/plain` without a preflight).
pub(crate) fn check_state_change(headers: &HeaderMap) -> Result<(), AdminError> {
    let text = |name: http::header::HeaderName| {
        headers
            .get(name)
            .map(|v| v.to_str().unwrap_or("\u{fffd}").trim())
    };
    if let Some(origin) = text(http::header::ORIGIN) {
        let host = text(http::header::HOST).unwrap_or("");
        let same = !host.is_empty()
            && ["http://", "https://"].iter().any(|scheme| {
                origin
                    .strip_prefix(scheme)
                    .is_some_and(|o| o.eq_ignore_ascii_case(host))
            });
        if !same {
            return Err(AdminError::CrossOrigin(origin.to_string()));
        }
    }
    if let Some(site) = headers.get("sec-fetch-site").and_then(|v| v.to_str().ok()) {
        if !matches!(site, "same-origin" | "none") {
            return Err(AdminError::CrossOrigin(format!("Sec-Fetch-Site: {site}")));
        }
    }
    let has_body = headers.contains_key(http::header::TRANSFER_ENCODING)
        || text(http::header::CONTENT_LENGTH).is_some_and(|l| l != "0");
    match text(http::header::CONTENT_TYPE) {
        Some(ct) if !is_json(ct) => Err(AdminError::UnsupportedMediaType),
        None if has_body => Err(AdminError::UnsupportedMediaType),
        _ => Ok(()),
    }
}

/// `application/json`, parameters (`; charset=utf-8`) allowed.
fn is_json(content_type: &str) -> bool {
    content_type
        .split(';')
        .next()
        .is_some_and(|m| m.trim().eq_ignore_ascii_case("application/json"))
}

/// The `Set-Cookie` value of a new session.
pub(crate) fn session_cookie(token: &str, ttl_s: u64) -> String {
    format!("{COOKIE}={token}; Path=/; Max-Age={ttl_s}; HttpOnly; SameSite=Strict")
}

/// The `Set-Cookie` value that ends a session.
pub(crate) fn cleared_cookie() -> String {
    format!("{COOKIE}=; Path=/; Max-Age=0; HttpOnly; SameSite=Strict")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tenants::hash_key;

    fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.append(*k, v.parse().unwrap());
        }
        h
    }

    fn cfg() -> AdminConfig {
        AdminConfig {
            key_sha256: Some(hash_key("adm-key")),
            ..AdminConfig::default()
        }
    }

    #[test]
    fn key_or_session_cookie_is_required_when_configured() {
        let s = Sessions::new();
        let c = cfg();
        assert!(authenticate(&c, &s, &headers(&[])).is_err());
        assert!(authenticate(&c, &s, &headers(&[("authorization", "Bearer nope")])).is_err());
        assert!(authenticate(&c, &s, &headers(&[("authorization", "Bearer adm-key")])).is_ok());
        let stored = stored_hash(&c).unwrap();
        let token = s.issue(&stored, unix_now(), 60);
        let cookie = format!("a=b; {COOKIE}={token}");
        assert!(authenticate(&c, &s, &headers(&[("cookie", &cookie)])).is_ok());
        // Another process's secret, an expired token, a tampered one: refused.
        assert!(authenticate(&c, &Sessions::new(), &headers(&[("cookie", &cookie)])).is_err());
        assert!(!s.verify(&stored, &s.issue(&stored, 100, 60), unix_now()));
        let tampered = token.replacen('.', "9.", 1);
        assert!(!s.verify(&stored, &tampered, unix_now()));
        // A new admin key invalidates the session.
        let other = stored_hash(&AdminConfig {
            key_sha256: Some(hash_key("new-key")),
            ..AdminConfig::default()
        })
        .unwrap();
        assert!(!s.verify(&other, &token, unix_now()));
        // No key configured: open.
        assert!(authenticate(&AdminConfig::default(), &s, &headers(&[])).is_ok());
    }

    #[test]
    fn state_changes_need_same_origin_and_json() {
        let ok = [
            ("host", "127.0.0.1:8081"),
            ("content-type", "application/json"),
        ];
        assert!(check_state_change(&headers(&ok)).is_ok());
        let same = [
            ("host", "127.0.0.1:8081"),
            ("origin", "http://127.0.0.1:8081"),
            ("content-length", "2"),
            ("content-type", "application/json; charset=utf-8"),
        ];
        assert!(check_state_change(&headers(&same)).is_ok());
        let cross = [
            ("host", "127.0.0.1:8081"),
            ("origin", "http://evil.example"),
        ];
        assert!(matches!(
            check_state_change(&headers(&cross)),
            Err(AdminError::CrossOrigin(_))
        ));
        let null = [("host", "127.0.0.1:8081"), ("origin", "null")];
        assert!(check_state_change(&headers(&null)).is_err());
        let fetch = [("host", "h"), ("sec-fetch-site", "cross-site")];
        assert!(check_state_change(&headers(&fetch)).is_err());
        let plain = [
            ("host", "h"),
            ("content-type", "text/plain"),
            ("content-length", "20"),
        ];
        assert!(matches!(
            check_state_change(&headers(&plain)),
            Err(AdminError::UnsupportedMediaType)
        ));
        let untyped = [("host", "h"), ("content-length", "20")];
        assert!(check_state_change(&headers(&untyped)).is_err());
        // No body, no type (`POST .../drain`, `DELETE`): fine.
        assert!(check_state_change(&headers(&[("host", "h"), ("content-length", "0")])).is_ok());
    }
}

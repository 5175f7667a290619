//! Authenticating the requests of a prefill/decode transfer with a deployment secret (the
//! transfer key, shared by the gateways and the replicas), defined once for both sides.
//!
//! * The gateway, naming a prefill replica in [`HEADER_PREFILL_FROM`], signs that URL in
//!   [`HEADER_PREFILL_AUTH`]: a decode replica with a key fetches only from a URL the
//!   gateway chose (one of its registered replicas), never from one a client wrote.
//! * The decode replica signs its `POST /v1/kv/prefill` to the prefill replica the same
//!   way (over the path), so a prefill replica with a key serves KV only to its peers.
//!
//! A value is `t=<unix ms>,mac=<hex HMAC-SHA256(key, purpose \n t \n subject)>`; it is
//! accepted within [`MAX_SKEW_MS`] of the verifier's clock.
//!
//! [`HEADER_PREFILL_FROM`]: crate::replica_api::HEADER_PREFILL_FROM

use hmac::{Hmac, Mac};
use sha2::Sha256;

/// Request header: the signature of [`HEADER_PREFILL_FROM`](crate::replica_api::HEADER_PREFILL_FROM)'s
/// URL (gateway to decode replica).
pub const HEADER_PREFILL_AUTH: &str = "x-warmpath-prefill-auth";
/// Request header: the signature of a KV pull (decode replica to prefill replica).
pub const HEADER_TRANSFER_AUTH: &str = "x-warmpath-transfer-auth";
/// How far a signature's time may be from the verifier's clock.
pub const MAX_SKEW_MS: u64 = 60_000;
/// The shortest transfer key accepted, in bytes.
pub const MIN_KEY_BYTES: usize = 32;

/// What a signature covers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Purpose {
    /// The gateway names the prefill replica to fetch from (subject: its URL).
    PrefillFrom,
    /// A decode replica pulls a prompt's KV (subject: the request path).
    Pull,
}

impl Purpose {
    fn label(self) -> &'static str {
        match self {
            Purpose::PrefillFrom => "warmpath-prefill-from",
            Purpose::Pull => "warmpath-kv-pull",
        }
    }
}

/// Why a signature was refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum AuthError {
    /// No signature, or not of the form `t=..,mac=..`.
    #[error("missing or malformed transfer signature")]
    Malformed,
    /// Signed too long ago or too far ahead.
    #[error("transfer signature outside the allowed clock skew")]
    Stale,
    /// The MAC does not match (another key, another subject).
    #[error("transfer signature does not verify")]
    Forged,
}

fn mac(key: &[u8], purpose: Purpose, at_ms: u64, subject: &str) -> Hmac<Sha256> {
    // HMAC takes a key of any length.
    let mut m = <Hmac<Sha256> as Mac>::new_from_slice(key).expect("HMAC takes any key length");
    m.update(purpose.label().as_bytes());
    m.update(b"\n");
    m.update(at_ms.to_string().as_bytes());
    m.update(b"\n");
    m.update(subject.as_bytes());
    m
}

/// The header value signing `subject` for `purpose` at `at_ms` (unix milliseconds).
pub fn sign(key: &[u8], purpose: Purpose, subject: &str, at_ms: u64) -> String {
    let tag = mac(key, purpose, at_ms, subject).finalize().into_bytes();
    format!("t={at_ms},mac={}", hex::encode(tag))
}

/// Checks `value` (a header from [`sign`]) against `subject` at `now_ms`.
pub fn verify(
    key: &[u8],
    purpose: Purpose,
    subject: &str,
    value: Option<&str>,
    now_ms: u64,
) -> Result<(), AuthError> {
    let value = value.ok_or(AuthError::Malformed)?;
    let (t, m) = value.split_once(",mac=").ok_or(AuthError::Malformed)?;
    let at_ms: u64 = t
        .strip_prefix("t=")
        .and_then(|t| t.parse().ok())
        .ok_or(AuthError::Malformed)?;
    let tag = hex::decode(m).map_err(|_| AuthError::Malformed)?;
    if at_ms.abs_diff(now_ms) > MAX_SKEW_MS {
        return Err(AuthError::Stale);
    }
    mac(key, purpose, at_ms, subject)
        .verify_slice(&tag)
        .map_err(|_| AuthError::Forged)
}

#[cfg(test)]
mod tests {
    use super::*;

    const KEY: &[u8] = b"0123456789abcdef0123456789abcdef";
    const URL: &str = "http://10.0.0.7:8001";

    #[test]
    fn a_signature_verifies_only_for_its_key_subject_purpose_and_time() {
        let now = 1_765_000_000_000;
        let v = sign(KEY, Purpose::PrefillFrom, URL, now);
        assert!(v.starts_with(&format!("t={now},mac=")), "{v}");
        assert_eq!(
            verify(KEY, Purpose::PrefillFrom, URL, Some(&v), now + 1_000),
            Ok(())
        );
        let other_key = b"another key, another deployment..";
        assert_eq!(
            verify(other_key, Purpose::PrefillFrom, URL, Some(&v), now),
            Err(AuthError::Forged)
        );
        assert_eq!(
            verify(KEY, Purpose::PrefillFrom, "http://evil:80", Some(&v), now),
            Err(AuthError::Forged)
        );
        assert_eq!(
            verify(KEY, Purpose::Pull, URL, Some(&v), now),
            Err(AuthError::Forged)
        );
        assert_eq!(
            verify(
                KEY,
                Purpose::PrefillFrom,
                URL,
                Some(&v),
                now + MAX_SKEW_MS + 1
            ),
            Err(AuthError::Stale)
        );
        // A later time written over the signed one.
        let moved = v.replacen(&now.to_string(), &(now + 5).to_string(), 1);
        assert_eq!(
            verify(KEY, Purpose::PrefillFrom, URL, Some(&moved), now),
            Err(AuthError::Forged)
        );
        for bad in [
            None,
            Some(""),
            Some("mac=00"),
            Some("t=x,mac=00"),
            Some("t=1,mac=zz"),
        ] {
            assert_eq!(
                verify(KEY, Purpose::PrefillFrom, URL, bad, now),
                Err(AuthError::Malformed),
                "{bad:?}"
            );
        }
    }

    #[test]
    fn the_signature_bytes_are_pinned() {
        // Gateways and replicas of different builds verify each other: keep this stable.
        // (Python: hmac.new(KEY, b"warmpath-kv-pull\n42\n/v1/kv/prefill", sha256).)
        assert_eq!(
            sign(KEY, Purpose::Pull, "/v1/kv/prefill", 42),
            "t=42,mac=ccaf677446f3d8ccd4bd1a9f8c6f3d371687775b2134a3afe2066d68590e51e1"
        );
    }
}

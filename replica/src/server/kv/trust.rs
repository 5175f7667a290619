//! Who may start a KV transfer. A decode replica fetches from the prefill replica named in
//! `x-warmpath-prefill-from` only when the gateway asked for it: with a transfer key
//! (`--kv-transfer-key-file`, the deployment secret the gateways share), the name must
//! carry the gateway's signature; without one, only a loopback address is honoured (the
//! one-machine demo), so a client that reaches a replica directly cannot make it POST
//! prompts to an address of the client's choosing. With a key, a prefill replica serves
//! `POST /v1/kv/prefill` only to a pull its peer signed.

use crate::server::error::ServerError;
use std::net::IpAddr;
use warmpath_protocol::transfer_auth::{self, AuthError, Purpose, MIN_KEY_BYTES};

/// The transfer key, or none.
#[derive(Clone, Default)]
pub struct TransferTrust {
    key: Option<Vec<u8>>,
}

impl std::fmt::Debug for TransferTrust {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TransferTrust")
            .field("key", &self.key.as_ref().map(|_| "<set>"))
            .finish()
    }
}

impl TransferTrust {
    /// Reads the key from `path` (trailing whitespace trimmed; at least
    /// [`MIN_KEY_BYTES`]), or no key when there is no path.
    pub fn from_file(path: Option<&str>) -> Result<Self, ServerError> {
        let Some(path) = path else {
            return Ok(Self::default());
        };
        let bytes = std::fs::read(path).map_err(|e| {
            ServerError::Config(format!("--kv-transfer-key-file {path}: cannot read: {e}"))
        })?;
        let key = bytes.trim_ascii_end().to_vec();
        if key.len() < MIN_KEY_BYTES {
            return Err(ServerError::Config(format!(
                "--kv-transfer-key-file {path}: the key has {} bytes, at least {MIN_KEY_BYTES} are needed",
                key.len()
            )));
        }
        Ok(Self { key: Some(key) })
    }

    /// A trust with `key` (tests).
    pub fn with_key(key: &[u8]) -> Self {
        Self {
            key: Some(key.to_vec()),
        }
    }

    /// Whether a key is set.
    pub fn has_key(&self) -> bool {
        self.key.is_some()
    }

    /// Whether to fetch from `from`, named with the signature `auth`, at `now_ms`.
    pub fn may_fetch_from(
        &self,
        from: &str,
        auth: Option<&str>,
        now_ms: u64,
    ) -> Result<(), AuthError> {
        match &self.key {
            Some(k) => transfer_auth::verify(k, Purpose::PrefillFrom, from, auth, now_ms),
            None if is_loopback_url(from) => Ok(()),
            None => Err(AuthError::Malformed),
        }
    }

    /// The signature a pull of `path` carries, when a key is set.
    pub fn sign_pull(&self, path: &str, now_ms: u64) -> Option<String> {
        let k = self.key.as_ref()?;
        Some(transfer_auth::sign(k, Purpose::Pull, path, now_ms))
    }

    /// Whether to serve a pull of `path` signed `auth` (always, without a key).
    pub fn may_serve_pull(
        &self,
        path: &str,
        auth: Option<&str>,
        now_ms: u64,
    ) -> Result<(), AuthError> {
        match &self.key {
            Some(k) => transfer_auth::verify(k, Purpose::Pull, path, auth, now_ms),
            None => Ok(()),
        }
    }
}

/// Unix milliseconds now.
pub fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

/// Whether `url` (`http://host[:port][/...]`) names a loopback host.
fn is_loopback_url(url: &str) -> bool {
    let Some(rest) = url.strip_prefix("http://") else {
        return false;
    };
    let authority = rest.split('/').next().unwrap_or("");
    if authority.contains('@') {
        return false;
    }
    let host = match authority.strip_prefix('[') {
        Some(v6) => v6.split(']').next().unwrap_or(""),
        None => authority.rsplit_once(':').map_or(authority, |(h, _)| h),
    };
    host == "localhost" || host.parse::<IpAddr>().is_ok_and(|ip| ip.is_loopback())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn without_a_key_only_loopback_prefill_replicas_are_fetched_from() {
        let t = TransferTrust::default();
        let now = now_ms();
        for ok in [
            "http://127.0.0.1:8001",
            "http://localhost:9",
            "http://[::1]:80/x",
        ] {
            assert_eq!(t.may_fetch_from(ok, None, now), Ok(()), "{ok}");
        }
        for bad in [
            "http://10.0.0.5:8001",
            "http://evil.example:80",
            "http://127.0.0.1@evil.example:80",
            "https://127.0.0.1:1",
            "http://127.0.0.1.evil.example",
        ] {
            assert!(t.may_fetch_from(bad, None, now).is_err(), "{bad}");
        }
        assert_eq!(t.may_serve_pull("/v1/kv/prefill", None, now), Ok(()));
    }

    #[test]
    fn with_a_key_only_a_signed_name_is_fetched_from_even_on_loopback() {
        let key = [7u8; 32];
        let t = TransferTrust::with_key(&key);
        let now = now_ms();
        let from = "http://127.0.0.1:8001";
        assert_eq!(t.may_fetch_from(from, None, now), Err(AuthError::Malformed));
        let sig = transfer_auth::sign(&key, Purpose::PrefillFrom, from, now);
        assert_eq!(t.may_fetch_from(from, Some(&sig), now), Ok(()));
        assert_eq!(
            t.may_fetch_from("http://127.0.0.1:8002", Some(&sig), now),
            Err(AuthError::Forged)
        );
        let pull = t.sign_pull("/v1/kv/prefill", now).unwrap();
        assert_eq!(t.may_serve_pull("/v1/kv/prefill", Some(&pull), now), Ok(()));
        assert!(t.may_serve_pull("/v1/kv/prefill", None, now).is_err());
        assert!(TransferTrust::default().sign_pull("/x", now).is_none());
    }

    #[test]
    fn a_short_or_missing_key_file_is_a_clear_error() {
        let dir = std::env::temp_dir().join(format!("wp-trust-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let short = dir.join("short");
        std::fs::write(&short, b"too short\n").unwrap();
        let e = TransferTrust::from_file(short.to_str())
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("--kv-transfer-key-file") && e.contains("at least 32"),
            "{e}"
        );
        let e = TransferTrust::from_file(dir.join("absent").to_str())
            .unwrap_err()
            .to_string();
        assert!(e.contains("cannot read"), "{e}");
        let good = dir.join("good");
        std::fs::write(&good, [b'k'; 40]).unwrap();
        assert!(TransferTrust::from_file(good.to_str()).unwrap().has_key());
        std::fs::remove_dir_all(&dir).unwrap();
    }
}

//! Authenticated tier values: with `--kv-store-key-file`, every value written to the tier
//! is `MAC || record`, where MAC is HMAC-SHA256 under the deployment's tier key over a
//! domain tag, the Redis key the value is stored under and the record. A reader refuses a
//! value whose MAC does not verify (reason `forged`): one written without the key or with
//! another, altered in Redis, or moved to another key. Without a key, values are the bare
//! record, as before, and anyone who can write to Redis can forge KV for any prompt.

use hmac::{Hmac, Mac};
use sha2::Sha256;
use std::path::Path;

/// Bytes of the MAC at the start of an authenticated value.
pub const MAC_LEN: usize = 32;

/// Fewest bytes a key file must hold.
pub const MIN_KEY_LEN: usize = 32;

/// Separates tier MACs from any other use of the same key.
const DOMAIN: &[u8] = b"warmpath-kv-tier-v1\0";

/// Why the tier key could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum TierKeyError {
    /// The file could not be read.
    #[error("--kv-store-key-file {path}: {source}")]
    Read {
        /// The file.
        path: String,
        /// The I/O error.
        source: std::io::Error,
    },
    /// The file holds too few bytes to be a secret.
    #[error("--kv-store-key-file {path}: holds {len} bytes; needs at least {MIN_KEY_LEN} random bytes (e.g. `head -c 32 /dev/urandom`)")]
    Short {
        /// The file.
        path: String,
        /// Bytes it held (after trimming a trailing newline).
        len: usize,
    },
}

/// The deployment's tier key. Cheap to clone.
#[derive(Clone)]
pub struct TierMac {
    key: std::sync::Arc<[u8]>,
}

impl std::fmt::Debug for TierMac {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("TierMac(..)")
    }
}

impl TierMac {
    /// A key of at least [`MIN_KEY_LEN`] bytes; `None` when shorter.
    pub fn new(key: &[u8]) -> Option<Self> {
        (key.len() >= MIN_KEY_LEN).then(|| Self { key: key.into() })
    }

    /// Reads the key from `path` (raw bytes; one trailing newline is ignored).
    pub fn load(path: &Path) -> Result<Self, TierKeyError> {
        let shown = path.display().to_string();
        let mut bytes = std::fs::read(path).map_err(|source| TierKeyError::Read {
            path: shown.clone(),
            source,
        })?;
        if bytes.last() == Some(&b'\n') {
            bytes.pop();
        }
        let len = bytes.len();
        Self::new(&bytes).ok_or(TierKeyError::Short { path: shown, len })
    }

    fn tag(&self, redis_key: &str, record: &[u8]) -> Hmac<Sha256> {
        // Any key length is accepted by HMAC.
        let mut m = <Hmac<Sha256> as Mac>::new_from_slice(&self.key)
            .unwrap_or_else(|_| unreachable!("HMAC takes keys of any length"));
        m.update(DOMAIN);
        m.update(&(redis_key.len() as u32).to_be_bytes());
        m.update(redis_key.as_bytes());
        m.update(record);
        m
    }

    /// The value to store under `redis_key`: `MAC || record`.
    pub fn seal(&self, redis_key: &str, record: &[u8]) -> Vec<u8> {
        let mac = self.tag(redis_key, record).finalize().into_bytes();
        let mut out = Vec::with_capacity(MAC_LEN + record.len());
        out.extend_from_slice(&mac);
        out.extend_from_slice(record);
        out
    }

    /// The record inside `value` read from `redis_key`, or `None` when its MAC does not
    /// verify (compared in constant time).
    pub fn open<'v>(&self, redis_key: &str, value: &'v [u8]) -> Option<&'v [u8]> {
        if value.len() < MAC_LEN {
            return None;
        }
        let (mac, record) = value.split_at(MAC_LEN);
        self.tag(redis_key, record).verify_slice(mac).ok()?;
        Some(record)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_sealed_value_opens_only_under_its_key_and_tier_key() {
        let k = TierMac::new(&[7u8; 32]).unwrap();
        let other = TierMac::new(&[8u8; 32]).unwrap();
        let v = k.seal("wpkv:1", b"record");
        assert_eq!(v.len(), MAC_LEN + 6);
        assert_eq!(k.open("wpkv:1", &v), Some(&b"record"[..]));
        assert_eq!(k.open("wpkv:2", &v), None, "moved to another key");
        assert_eq!(other.open("wpkv:1", &v), None, "another tier key");
        assert_eq!(k.open("wpkv:1", b"record"), None, "unsealed");
        let mut bad = v.clone();
        *bad.last_mut().unwrap() ^= 1;
        assert_eq!(k.open("wpkv:1", &bad), None, "altered");
        assert!(TierMac::new(&[1u8; 31]).is_none());
    }

    #[test]
    fn a_short_key_file_is_refused_with_what_to_do() {
        let dir = std::env::temp_dir().join(format!("wp-tier-key-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let p = dir.join("short");
        std::fs::write(&p, b"tooshort\n").unwrap();
        let e = TierMac::load(&p).unwrap_err().to_string();
        assert!(e.contains("--kv-store-key-file") && e.contains("32"), "{e}");
        let p = dir.join("ok");
        std::fs::write(&p, [9u8; 40]).unwrap();
        assert!(TierMac::load(&p).is_ok());
    }
}

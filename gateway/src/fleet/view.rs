//! What each gateway holds of the key store: [`KeyView`], the copy it last read, stamped
//! with the store's id and epoch; and a stored key's record, [`StoredKey`].

use parking_lot::RwLock;
use serde::{Deserialize, Serialize};
use std::collections::{HashMap, HashSet};
use std::sync::Arc;

/// `source` of a key written from a gateway's config file.
pub(crate) const FROM_CONFIG: &str = "config";

/// A key as stored (never the key itself).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub(crate) struct StoredKey {
    /// The tenant it authenticates.
    pub tenant: String,
    /// Public id: `k-` and the first 12 hex digits of its hash.
    pub key_id: String,
    /// Unix seconds of its creation (0 for keys seeded from the config).
    pub created: u64,
    /// `admin` (made by the admin API) or `config` (written from a gateway's YAML file).
    pub source: String,
    /// For `config` keys: the fingerprint of the config key set that wrote it last
    /// ([`config_fingerprint`]); empty for `admin` keys.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub config: String,
}

impl StoredKey {
    /// Whether the key came from a config file: it authenticates only on gateways whose
    /// own config lists it, never through the store.
    pub(crate) fn is_config_key(&self) -> bool {
        self.source == FROM_CONFIG
    }
}

/// The public id of the key whose SHA-256 is `hash`.
pub(crate) fn key_id(hash: &[u8; 32]) -> String {
    format!("k-{}", &hex::encode(hash)[..12])
}

/// 12 hex digits naming a config's key set (tenant and hash of every key, in any order).
pub(crate) fn config_fingerprint(keys: &[(String, [u8; 32])]) -> String {
    use sha2::{Digest, Sha256};
    let mut sorted: Vec<_> = keys.iter().collect();
    sorted.sort();
    let mut h = Sha256::new();
    for (tenant, hash) in sorted {
        h.update(tenant.as_bytes());
        h.update([0]);
        h.update(hash);
    }
    hex::encode(&h.finalize()[..6])
}

/// Which copy of the store a view holds: the store's random id (drawn when the store is
/// created, so a Redis that lost its data gets a new one) and its change counter. A
/// verified-key cache entry from another stamp is checked again.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) struct Stamp {
    /// The store's id.
    pub store: u64,
    /// Its epoch (change counter).
    pub epoch: u64,
}

/// This gateway's copy of the store.
#[derive(Debug, Default)]
pub(crate) struct KeyView {
    inner: RwLock<ViewState>,
}

#[derive(Debug, Default)]
struct ViewState {
    /// The copy's stamp; `None` before the first read.
    stamp: Option<Stamp>,
    /// Keys made through the admin API, by hash: their tenant.
    keys: HashMap<[u8; 32], Arc<str>>,
    revoked: HashSet<[u8; 32]>,
}

impl KeyView {
    /// The stamp of the copy; `None` until the store has been read once (no key can be
    /// checked against its revocations yet).
    pub(crate) fn stamp(&self) -> Option<Stamp> {
        self.inner.read().stamp
    }

    /// The tenant an admin-made key hash belongs to in the store.
    pub(crate) fn tenant_of(&self, hash: &[u8; 32]) -> Option<Arc<str>> {
        self.inner.read().keys.get(hash).cloned()
    }

    /// Whether a key hash was revoked.
    pub(crate) fn is_revoked(&self, hash: &[u8; 32]) -> bool {
        self.inner.read().revoked.contains(hash)
    }

    /// Every revoked hash this view knows (written back into a store that lost them).
    pub(crate) fn revoked(&self) -> Vec<[u8; 32]> {
        self.inner.read().revoked.iter().copied().collect()
    }

    /// Replaces the copy with the store as read at `stamp`: its admin-made keys (tenant by
    /// hash) and its revoked hashes.
    pub(crate) fn replace(
        &self,
        stamp: Stamp,
        keys: HashMap<[u8; 32], Arc<str>>,
        revoked: HashSet<[u8; 32]>,
    ) {
        *self.inner.write() = ViewState {
            stamp: Some(stamp),
            keys,
            revoked,
        };
    }
}

pub(super) fn decode(hash_hex: &str) -> Option<[u8; 32]> {
    hex::decode(hash_hex).ok()?.try_into().ok()
}

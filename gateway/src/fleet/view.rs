//! What each gateway holds of the key store: [`KeyView`], the copy it last read, with the
//! store's epoch; and a stored key's record, [`StoredKey`].

use parking_lot::RwLock;
use serde::{Deserialize, Serialize};
use std::collections::{HashMap, HashSet};
use std::sync::Arc;

/// A key as stored (never the key itself).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub(crate) struct StoredKey {
    /// The tenant it authenticates.
    pub tenant: String,
    /// Public id: `k-` and the first 12 hex digits of its hash.
    pub key_id: String,
    /// Unix seconds of its creation (0 for keys seeded from the config).
    pub created: u64,
    /// `admin` (made by the admin API) or `config` (seeded from the YAML file).
    pub source: String,
}

/// The public id of the key whose SHA-256 is `hash`.
pub(crate) fn key_id(hash: &[u8; 32]) -> String {
    format!("k-{}", &hex::encode(hash)[..12])
}

/// This gateway's copy of the store.
#[derive(Debug, Default)]
pub(crate) struct KeyView {
    inner: RwLock<ViewState>,
}

#[derive(Debug, Default)]
struct ViewState {
    /// Epoch of the copy; 0 before the first read.
    epoch: u64,
    keys: HashMap<[u8; 32], Arc<str>>,
    revoked: HashSet<[u8; 32]>,
}

impl KeyView {
    /// The epoch of the copy (a verified-key cache entry from another epoch is stale).
    pub(crate) fn epoch(&self) -> u64 {
        self.inner.read().epoch
    }

    /// The tenant a key hash belongs to in the store.
    pub(crate) fn tenant_of(&self, hash: &[u8; 32]) -> Option<Arc<str>> {
        self.inner.read().keys.get(hash).cloned()
    }

    /// Whether a key hash was revoked.
    pub(crate) fn is_revoked(&self, hash: &[u8; 32]) -> bool {
        self.inner.read().revoked.contains(hash)
    }

    /// Replaces the copy with the store as read at `epoch`.
    pub(crate) fn replace(
        &self,
        epoch: u64,
        keys: HashMap<[u8; 32], Arc<str>>,
        revoked: HashSet<[u8; 32]>,
    ) {
        *self.inner.write() = ViewState {
            epoch,
            keys,
            revoked,
        };
    }
}

pub(super) fn decode(hash_hex: &str) -> Option<[u8; 32]> {
    hex::decode(hash_hex).ok()?.try_into().ok()
}

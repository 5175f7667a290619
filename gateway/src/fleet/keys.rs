//! Tenants' API keys in Redis: the admin API creates, lists, rotates and revokes them, and
//! every gateway follows the store by polling one counter.
//!
//! # In Redis
//! All under one hash tag, so an update is one atomic pipeline on one Cluster slot:
//! - `<prefix>:{keys}:all`: hash, SHA-256 (hex) of a key -> [`StoredKey`] JSON, `source`
//!   `admin` (made by the admin API) or `config` (written from a gateway's config, with
//!   the fingerprint of that config's key set);
//! - `<prefix>:{keys}:revoked`: set of revoked hashes (config keys too, so no config brings
//!   one back);
//! - `<prefix>:{keys}:epoch`: counter bumped by every change;
//! - `<prefix>:{keys}:store`: the store's random id, drawn when the store is created: a
//!   Redis that lost its data gets a new one, so its counter restarting at 1 never matches
//!   a copy of the old store.
//!
//! # Config keys
//! A config key authenticates only on a gateway whose own config lists it (and only while
//! the store has not revoked it); the store's copy is there to be listed, rotated and
//! revoked. So a key removed from a gateway's config is refused by that gateway at once,
//! and two gateways running different configs each enforce their own (a rolling config
//! change takes effect gateway by gateway; revoke through the admin API to reach the whole
//! fleet within a poll). At start, on each reload and when the store was recreated, a
//! gateway reconciles the store with its config ([`super::reconcile`]).
//!
//! # In each gateway
//! A [`KeyView`]: the last copy read, stamped with the store's id and epoch. A poll every
//! `keys_poll_ms` reads both (one round trip) and, when either moved, the hash and the set:
//! a revoked key is refused everywhere within one poll. Keys are never stored in clear; a
//! new key is shown once. Until the first read, every key is refused with a 503 (nothing
//! can be checked against the store's revocations yet). While Redis is unreachable after
//! that, the view stays as it was: keys it holds keep working and a key it never held is
//! refused (fail closed).

use super::conn::Conn;
use super::view::{decode, key_id, KeyView, Stamp, StoredKey};
use super::Fleet;
use sha2::{Digest, Sha256};
use std::collections::{HashMap, HashSet};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

/// Why a key operation failed.
#[derive(Debug, thiserror::Error)]
pub(crate) enum KeyError {
    /// Shared state is in memory.
    #[error("the keys API needs shared state: set `state.backend: redis`")]
    NoStore,
    /// Redis did not answer.
    #[error("Redis is unreachable: {0}")]
    Unavailable(String),
    /// No key with that id for that tenant.
    #[error("tenant {tenant} has no key {key_id}")]
    NoSuchKey {
        /// Tenant.
        tenant: String,
        /// Key id.
        key_id: String,
    },
}

impl Fleet {
    pub(super) fn keys_key(&self, what: &str) -> String {
        format!("{}:{{keys}}:{what}", self.cfg.key_prefix)
    }

    /// The key store as this gateway last read it.
    pub(crate) fn key_view(&self) -> &KeyView {
        &self.keys
    }

    fn conn_or_unavailable(&self) -> Result<Conn, KeyError> {
        self.live_conn()
            .ok_or_else(|| KeyError::Unavailable("not connected (gateway degraded)".into()))
    }

    pub(super) async fn run<T: redis::FromRedisValue>(
        &self,
        conn: &Conn,
        pipe: &redis::Pipeline,
    ) -> Result<T, KeyError> {
        super::within(self.background_timeout(1000), conn.pipeline(pipe))
            .await
            .map_err(KeyError::Unavailable)
    }

    /// Creates a key for `tenant`; returns the key (shown this once) and its record.
    pub(crate) async fn create_key(&self, tenant: &str) -> Result<(String, StoredKey), KeyError> {
        let conn = self.conn_or_unavailable()?;
        let key = format!("wp-{}", hex::encode(rand::random::<[u8; 24]>()));
        let hash: [u8; 32] = Sha256::digest(key.as_bytes()).into();
        let stored = StoredKey {
            tenant: tenant.to_string(),
            key_id: key_id(&hash),
            created: std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_secs()),
            source: "admin".into(),
            config: String::new(),
        };
        let json = serde_json::to_string(&stored).unwrap_or_default();
        let mut pipe = redis::pipe();
        pipe.atomic()
            .hset(self.keys_key("all"), hex::encode(hash), json)
            .ignore()
            .incr(self.keys_key("epoch"), 1)
            .ignore();
        self.run::<()>(&conn, &pipe).await?;
        // This gateway follows at once; the others within a poll.
        let _ = self.sync_keys(&conn).await;
        Ok((key, stored))
    }

    /// Every key of `tenant` in the store.
    pub(crate) async fn list_keys(&self, tenant: &str) -> Result<Vec<StoredKey>, KeyError> {
        Ok(self
            .read_all()
            .await?
            .into_values()
            .filter(|k| k.tenant == tenant)
            .collect())
    }

    async fn read_all(&self) -> Result<HashMap<String, StoredKey>, KeyError> {
        let conn = self.conn_or_unavailable()?;
        let mut pipe = redis::pipe();
        pipe.hgetall(self.keys_key("all"));
        let (all,): (HashMap<String, String>,) = self.run(&conn, &pipe).await?;
        Ok(all
            .into_iter()
            .filter_map(|(h, v)| Some((h, serde_json::from_str(&v).ok()?)))
            .collect())
    }

    /// Revokes `tenant`'s key `key_id` everywhere.
    pub(crate) async fn revoke_key(&self, tenant: &str, key_id: &str) -> Result<(), KeyError> {
        let conn = self.conn_or_unavailable()?;
        let found = self
            .read_all()
            .await?
            .into_iter()
            .find(|(_, k)| k.tenant == tenant && k.key_id == key_id);
        let Some((hash, _)) = found else {
            return Err(KeyError::NoSuchKey {
                tenant: tenant.into(),
                key_id: key_id.into(),
            });
        };
        let mut pipe = redis::pipe();
        pipe.atomic()
            .hdel(self.keys_key("all"), &hash)
            .ignore()
            .sadd(self.keys_key("revoked"), &hash)
            .ignore()
            .incr(self.keys_key("epoch"), 1)
            .ignore();
        self.run::<()>(&conn, &pipe).await?;
        // Refused here from this answer on; by the others within a poll.
        self.sync_keys(&conn).await
    }

    /// Sets the config's keys (tenant, SHA-256) to reconcile the store with, at the next
    /// poll (the start, and each reload).
    pub(crate) fn set_seed_keys(&self, keys: Vec<(String, [u8; 32])>) {
        *self.seed.write() = keys;
        self.reconcile_due.store(true, Ordering::Release);
    }

    /// One poll: reads the store's id and epoch, and the store when either moved. A store
    /// without an id is new or was wiped (a Redis restarted empty), and one with another id
    /// than this gateway read last was recreated by another gateway: this gateway
    /// reconciles it with its config first ([`Fleet::reconcile`]), as after a start or a
    /// reload.
    pub(super) async fn sync_keys(&self, conn: &Conn) -> Result<(), KeyError> {
        let mut pipe = redis::pipe();
        pipe.get(self.keys_key("store")).get(self.keys_key("epoch"));
        let (store, epoch): (Option<u64>, Option<u64>) = self.run(conn, &pipe).await?;
        let known = self.keys.stamp();
        let reset = store.is_none() || known.is_some_and(|k| Some(k.store) != store);
        if reset || self.reconcile_due.swap(false, Ordering::AcqRel) {
            if let Err(e) = self.reconcile(conn).await {
                self.reconcile_due.store(true, Ordering::Release);
                return Err(e);
            }
        } else if let (Some(store), Some(epoch)) = (store, epoch) {
            if known == Some(Stamp { store, epoch }) {
                return Ok(());
            }
        }
        let mut pipe = redis::pipe();
        pipe.atomic()
            .get(self.keys_key("store"))
            .get(self.keys_key("epoch"))
            .hgetall(self.keys_key("all"))
            .smembers(self.keys_key("revoked"));
        type Read = (
            Option<u64>,
            Option<u64>,
            HashMap<String, String>,
            HashSet<String>,
        );
        let (store, epoch, all, revoked): Read = self.run(conn, &pipe).await?;
        let Some(store) = store else {
            return Err(KeyError::Unavailable(
                "the key store was wiped while it was read".into(),
            ));
        };
        // Config keys authenticate through each gateway's own config, never the store.
        let keys = all
            .into_iter()
            .filter_map(|(h, v)| {
                let k: StoredKey = serde_json::from_str(&v).ok()?;
                (!k.is_config_key()).then_some((decode(&h)?, Arc::from(k.tenant)))
            })
            .collect();
        let revoked = revoked.iter().filter_map(|h| decode(h)).collect();
        let stamp = Stamp {
            store,
            epoch: epoch.unwrap_or(0),
        };
        self.keys.replace(stamp, keys, revoked);
        Ok(())
    }

    /// Follows the key store: a poll every `keys_poll_ms`, skipped while degraded.
    pub(super) fn follow_keys(self: &Arc<Self>) {
        let fleet = self.clone();
        self.handle.spawn(async move {
            let every = Duration::from_millis(fleet.cfg.keys_poll_ms);
            loop {
                tokio::time::sleep(every).await;
                let Ok(conn) = fleet.conn_or_unavailable() else {
                    continue;
                };
                if let Err(e) = fleet.sync_keys(&conn).await {
                    fleet.failed(&e);
                }
            }
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{Config, TenantConfig};
    use crate::tenants::{hash_key, TenantTable};

    fn table() -> TenantTable {
        let mut c = Config::default();
        c.auth.salt_secret = "0123456789abcdef-secret".into();
        c.tenants = vec![TenantConfig {
            id: "a".into(),
            api_key_sha256: vec![hash_key("config-key")],
            models: vec!["*".into()],
            limits: Default::default(),
            regions: Vec::new(),
            flow: Default::default(),
        }];
        TenantTable::build(&c, None)
    }

    fn digest(key: &str) -> [u8; 32] {
        Sha256::digest(key.as_bytes()).into()
    }

    fn set(view: &KeyView, stamp: (u64, u64), keys: &[(&str, &str)], revoked: &[&str]) {
        view.replace(
            Stamp {
                store: stamp.0,
                epoch: stamp.1,
            },
            keys.iter()
                .map(|(k, t)| (digest(k), Arc::from(*t)))
                .collect(),
            revoked.iter().map(|k| digest(k)).collect(),
        );
    }

    fn auth(t: &TenantTable, key: &str, view: &KeyView) -> Result<String, u16> {
        t.authenticate_with(Some(format!("Bearer {key}").as_bytes()), Some(view))
            .map(|t| t.id.to_string())
            .map_err(|e| e.status())
    }

    #[test]
    fn the_store_adds_and_revokes_keys_and_a_new_epoch_reaches_remembered_ones() {
        let t = table();
        let view = KeyView::default();
        // Nothing read yet: no key can be checked against the store's revocations.
        assert_eq!(auth(&t, "config-key", &view), Err(503));
        set(
            &view,
            (7, 1),
            &[("stored-key", "a"), ("orphan", "gone")],
            &[],
        );
        assert_eq!(auth(&t, "config-key", &view).unwrap(), "a");
        assert_eq!(auth(&t, "stored-key", &view).unwrap(), "a");
        // A stored key of a tenant the config does not have, and an unknown key: refused.
        assert_eq!(auth(&t, "orphan", &view), Err(401));
        assert_eq!(auth(&t, "never-made", &view), Err(401));
        // Both remembered keys are revoked at the next epoch: refused at once.
        set(&view, (7, 2), &[], &["config-key", "stored-key"]);
        assert_eq!(auth(&t, "config-key", &view), Err(401));
        assert_eq!(auth(&t, "stored-key", &view), Err(401));
        // Without the store, the config alone decides.
        assert!(t.authenticate(Some(b"Bearer config-key")).is_ok());
    }

    #[test]
    fn a_store_that_lost_its_data_never_matches_a_remembered_stamp() {
        let t = table();
        let view = KeyView::default();
        set(&view, (7, 2), &[("stored-key", "a")], &[]);
        assert_eq!(auth(&t, "stored-key", &view).unwrap(), "a");
        // Redis restarted empty and its counter climbed back to 2: a new store id, so the
        // remembered key is checked again, and the new store does not have it.
        set(&view, (8, 2), &[], &[]);
        assert_eq!(auth(&t, "stored-key", &view), Err(401));
        assert_eq!(auth(&t, "config-key", &view).unwrap(), "a");
    }

    #[test]
    fn key_ids_are_the_hash_prefix() {
        let h = digest("k");
        assert_eq!(key_id(&h), format!("k-{}", &hex::encode(h)[..12]));
    }
}

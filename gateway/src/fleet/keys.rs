//! Tenants' API keys in Redis: the admin API creates, lists, rotates and revokes them, and
//! every gateway follows the store by polling one counter.
//!
//! # In Redis
//! All under one hash tag, so an update is one atomic pipeline on one Cluster slot:
//! - `<prefix>:{keys}:all`: hash, SHA-256 (hex) of a key -> [`StoredKey`] JSON;
//! - `<prefix>:{keys}:revoked`: set of revoked hashes (config keys too, so a restart's
//!   seeding never brings one back);
//! - `<prefix>:{keys}:epoch`: counter bumped by every change.
//!
//! # In each gateway
//! A [`KeyView`]: the last copy read, with its epoch. A poll every `keys_poll_ms` reads the
//! counter (one `GET`) and, when it moved, the hash and the set: a revoked key is refused
//! everywhere within one poll. Keys are never stored in clear; a new key is shown once.
//! While Redis is unreachable the view stays as it was: keys it holds keep working and a key
//! it never held is refused (fail closed).

use super::conn::Conn;
use super::view::{decode, key_id, KeyView, StoredKey};
use super::Fleet;
use sha2::{Digest, Sha256};
use std::collections::{HashMap, HashSet};
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
    fn keys_key(&self, what: &str) -> String {
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

    async fn run<T: redis::FromRedisValue>(
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

    /// Writes the config's keys into the store (never one that was revoked) and starts its
    /// epoch.
    async fn seed_keys(&self, conn: &Conn) -> Result<(), KeyError> {
        let seeds = self.seed.read().clone();
        let mut pipe = redis::pipe();
        pipe.smembers(self.keys_key("revoked"));
        let (revoked,): (HashSet<String>,) = self.run(conn, &pipe).await?;
        let mut pipe = redis::pipe();
        pipe.atomic();
        for (tenant, hash) in seeds.iter() {
            let h = hex::encode(hash);
            if revoked.contains(&h) {
                continue;
            }
            let stored = StoredKey {
                tenant: tenant.clone(),
                key_id: key_id(hash),
                created: 0,
                source: "config".into(),
            };
            let json = serde_json::to_string(&stored).unwrap_or_default();
            pipe.hset_nx(self.keys_key("all"), h, json).ignore();
        }
        pipe.incr(self.keys_key("epoch"), 1).ignore();
        self.run::<()>(conn, &pipe).await
    }

    /// Sets the config's keys (tenant, SHA-256) to seed the store with.
    pub(crate) fn set_seed_keys(&self, keys: Vec<(String, [u8; 32])>) {
        *self.seed.write() = keys;
    }

    /// One poll: reads the epoch, and the store when it moved. A store without an epoch
    /// is new or was wiped (a Redis restarted empty): the config's keys seed it first.
    pub(super) async fn sync_keys(&self, conn: &Conn) -> Result<(), KeyError> {
        let mut pipe = redis::pipe();
        pipe.get(self.keys_key("epoch"));
        let (epoch,): (Option<u64>,) = self.run(conn, &pipe).await?;
        match epoch {
            None => self.seed_keys(conn).await?,
            Some(e) if e == self.keys.epoch() => return Ok(()),
            Some(_) => {}
        }
        let mut pipe = redis::pipe();
        pipe.atomic()
            .get(self.keys_key("epoch"))
            .hgetall(self.keys_key("all"))
            .smembers(self.keys_key("revoked"));
        let (epoch, all, revoked): (Option<u64>, HashMap<String, String>, HashSet<String>) =
            self.run(conn, &pipe).await?;
        let keys = all
            .into_iter()
            .filter_map(|(h, v)| {
                let k: StoredKey = serde_json::from_str(&v).ok()?;
                Some((decode(&h)?, Arc::from(k.tenant)))
            })
            .collect();
        let revoked = revoked.iter().filter_map(|h| decode(h)).collect();
        self.keys.replace(epoch.unwrap_or(0), keys, revoked);
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
        }];
        TenantTable::build(&c, None)
    }

    fn digest(key: &str) -> [u8; 32] {
        Sha256::digest(key.as_bytes()).into()
    }

    fn set(view: &KeyView, epoch: u64, keys: &[(&str, &str)], revoked: &[&str]) {
        view.replace(
            epoch,
            keys.iter()
                .map(|(k, t)| (digest(k), Arc::from(*t)))
                .collect(),
            revoked.iter().map(|k| digest(k)).collect(),
        );
    }

    #[test]
    fn the_store_adds_and_revokes_keys_and_a_new_epoch_reaches_remembered_ones() {
        let t = table();
        let view = KeyView::default();
        let auth = |k: &str, v: &KeyView| {
            t.authenticate_with(Some(format!("Bearer {k}").as_bytes()), Some(v))
                .map(|t| t.id.to_string())
        };
        set(&view, 1, &[("stored-key", "a"), ("orphan", "gone")], &[]);
        assert_eq!(auth("config-key", &view).unwrap(), "a");
        assert_eq!(auth("stored-key", &view).unwrap(), "a");
        // A stored key of a tenant the config does not have, and an unknown key: refused.
        assert!(auth("orphan", &view).is_err());
        assert!(auth("never-made", &view).is_err());
        // Both remembered keys are revoked at the next epoch: refused at once.
        set(&view, 2, &[], &["config-key", "stored-key"]);
        assert!(auth("config-key", &view).is_err());
        assert!(auth("stored-key", &view).is_err());
        // Without the store, the config alone decides.
        assert!(t.authenticate(Some(b"Bearer config-key")).is_ok());
    }

    #[test]
    fn key_ids_are_the_hash_prefix() {
        let h = digest("k");
        assert_eq!(key_id(&h), format!("k-{}", &hex::encode(h)[..12]));
    }
}

//! Reconciling the shared key store with this gateway's config, at start, on each reload
//! and when the store was recreated (Redis lost its data):
//! - the config's keys are written as `source: config` records carrying the config's
//!   fingerprint, except those the store revoked;
//! - `config` records of keys this config no longer lists are removed (they authenticate
//!   nowhere through the store anyway: see [`super::keys`]);
//! - the revocations this gateway knows are written back (a store that lost them gets
//!   them again: a revoked key stays revoked while any gateway remembers it);
//! - a new store gets its random id, and the epoch moves so every gateway reads it again.
//!
//! Keys made through the admin API are never touched here.

use super::conn::Conn;
use super::keys::KeyError;
use super::view::{config_fingerprint, key_id, StoredKey, FROM_CONFIG};
use super::Fleet;
use std::collections::{HashMap, HashSet};

/// What reconciling changes in the store's `all` hash.
#[derive(Debug, Default, PartialEq)]
pub(super) struct Plan {
    /// (hash hex, record JSON) to write.
    pub write: Vec<(String, String)>,
    /// Hashes (hex) of `config` records to remove.
    pub remove: Vec<String>,
}

/// The changes that make `all` (hash hex -> record JSON) hold exactly `config`'s keys as
/// `config` records, given the `revoked` hashes (hex).
pub(super) fn plan(
    config: &[(String, [u8; 32])],
    all: &HashMap<String, String>,
    revoked: &HashSet<String>,
) -> Plan {
    let fingerprint = config_fingerprint(config);
    let mut plan = Plan::default();
    let mut listed = HashSet::new();
    for (tenant, hash) in config {
        let h = hex::encode(hash);
        listed.insert(h.clone());
        if revoked.contains(&h) {
            continue;
        }
        let stored: Option<StoredKey> = all.get(&h).and_then(|v| serde_json::from_str(v).ok());
        match stored {
            // An admin key with the same hash stays as it is.
            Some(k) if !k.is_config_key() => continue,
            Some(k) if k.tenant == *tenant && k.config == fingerprint => continue,
            _ => {}
        }
        let record = StoredKey {
            tenant: tenant.clone(),
            key_id: key_id(hash),
            created: 0,
            source: FROM_CONFIG.into(),
            config: fingerprint.clone(),
        };
        let json = serde_json::to_string(&record).unwrap_or_default();
        plan.write.push((h, json));
    }
    for (h, v) in all {
        let from_config = serde_json::from_str::<StoredKey>(v).is_ok_and(|k| k.is_config_key());
        if from_config && (!listed.contains(h) || revoked.contains(h)) {
            plan.remove.push(h.clone());
        }
    }
    plan.remove.sort();
    plan
}

impl Fleet {
    /// Reconciles the store with this gateway's config (the module docs say how).
    pub(super) async fn reconcile(&self, conn: &Conn) -> Result<(), KeyError> {
        let config = self.seed.read().clone();
        let mut pipe = redis::pipe();
        pipe.hgetall(self.keys_key("all"))
            .smembers(self.keys_key("revoked"));
        let (all, mut revoked): (HashMap<String, String>, HashSet<String>) =
            self.run(conn, &pipe).await?;
        let known: Vec<String> = self.keys.revoked().iter().map(hex::encode).collect();
        revoked.extend(known.iter().cloned());
        let plan = plan(&config, &all, &revoked);
        let mut pipe = redis::pipe();
        pipe.atomic()
            .set_nx(
                self.keys_key("store"),
                rand::random::<u64>().max(1).to_string(),
            )
            .ignore();
        if !known.is_empty() {
            pipe.sadd(self.keys_key("revoked"), &known).ignore();
        }
        for (h, json) in &plan.write {
            pipe.hset(self.keys_key("all"), h, json).ignore();
        }
        if !plan.remove.is_empty() {
            pipe.hdel(self.keys_key("all"), &plan.remove).ignore();
        }
        pipe.incr(self.keys_key("epoch"), 1).ignore();
        self.run::<()>(conn, &pipe).await?;
        tracing::info!(
            config_keys = config.len(),
            written = plan.write.len(),
            removed = plan.remove.len(),
            "key store reconciled with this gateway's config"
        );
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn h(n: u8) -> [u8; 32] {
        [n; 32]
    }

    fn record(tenant: &str, source: &str, config: &str) -> String {
        serde_json::to_string(&StoredKey {
            tenant: tenant.into(),
            key_id: "k-x".into(),
            created: 0,
            source: source.into(),
            config: config.into(),
        })
        .unwrap()
    }

    #[test]
    fn config_keys_are_written_and_those_the_config_dropped_are_removed() {
        let config = vec![("a".to_string(), h(1)), ("b".to_string(), h(2))];
        let fp = config_fingerprint(&config);
        let all: HashMap<String, String> = [
            (hex::encode(h(1)), record("a", "config", &fp)),
            (hex::encode(h(3)), record("b", "config", "older")),
            (hex::encode(h(4)), record("b", "admin", "")),
            (hex::encode(h(5)), record("a", "config", "older")),
        ]
        .into();
        let revoked: HashSet<String> = [hex::encode(h(5))].into();
        let p = plan(&config, &all, &revoked);
        // Key 1 is up to date; key 2 is new.
        assert_eq!(p.write.len(), 1);
        assert_eq!(p.write[0].0, hex::encode(h(2)));
        let written: StoredKey = serde_json::from_str(&p.write[0].1).unwrap();
        assert!(written.is_config_key());
        assert_eq!(
            (written.tenant.as_str(), written.config.as_str()),
            ("b", fp.as_str())
        );
        // Key 3 left the config, key 5 was revoked; the admin key 4 stays.
        assert_eq!(p.remove, vec![hex::encode(h(3)), hex::encode(h(5))]);
    }

    #[test]
    fn a_revoked_config_key_is_never_written_back() {
        let config = vec![("a".to_string(), h(1))];
        let revoked: HashSet<String> = [hex::encode(h(1))].into();
        assert_eq!(plan(&config, &HashMap::new(), &revoked), Plan::default());
    }

    #[test]
    fn the_fingerprint_names_the_key_set_in_any_order() {
        let one = vec![("a".to_string(), h(1)), ("b".to_string(), h(2))];
        let two = vec![("b".to_string(), h(2)), ("a".to_string(), h(1))];
        assert_eq!(config_fingerprint(&one), config_fingerprint(&two));
        assert_ne!(config_fingerprint(&one), config_fingerprint(&one[..1]));
        assert_eq!(config_fingerprint(&one).len(), 12);
    }
}

//! Tenants: API-key authentication (keys stored as SHA-256, compared in constant time),
//! model allowlists, and the per-tenant cache salt (HMAC of the tenant id).
//!
//! # Verified keys
//! SHA-256 is the costliest step of a short request on a CPU without SHA instructions
//! (about 3,500 of the gateway's 100,000 instructions per request, and much of its code
//! cache). So a key that has matched a stored hash once is remembered by its keyed
//! SipHash-2-4 (128-bit output, a PRF under a random key drawn when the table is built)
//! and later requests with it take one SipHash and one map lookup. Nothing of the key
//! itself is kept; only keys that matched enter, so the map holds at most one entry per
//! configured key; a reload builds a new table and so forgets every entry (a removed key
//! stops working at once). A key that never matched always takes the SHA-256 path, which
//! compares against every stored hash in constant time.
//!
//! # Layout
//! - this module: the tenant table, authentication, salts and root seeds.
//! - [`limits`]: each tenant's limiter and the reservation a request holds.
//! - [`fleet_limits`]: admission on the fleet's shared limits (Redis), as a permit or a 429.

pub(crate) mod fleet_limits;
pub(crate) mod limits;

use crate::config::{Config, StateBackend, StateConfig, TenantConfig, TenantFlow, TenantLimits};
use crate::error::GatewayError;
use crate::fleet::view::{KeyView, Stamp};
use hmac::{Hmac, Mac};
use limits::TenantLimiter;
use parking_lot::{Mutex, RwLock};
use sha2::{Digest, Sha256};
use siphasher::sip128::{Hasher128, SipHasher24};
use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};
use std::sync::Arc;
use subtle::ConstantTimeEq;
use warmpath_core::{CacheSalt, CheckpointId, HashNamespace, RegionId, RootSeed};

/// Tenant id used when authentication is off.
pub(crate) const LOCAL_TENANT: &str = "local";

/// One authenticated tenant.
#[derive(Debug)]
pub(crate) struct Tenant {
    /// Tenant id.
    pub id: Arc<str>,
    /// Allowed models (`*` = all).
    models: Vec<String>,
    /// The cache salt the gateway stamps on this tenant's requests.
    pub salt: CacheSalt,
    /// [`Self::salt`] as the header value sent to replicas.
    pub salt_header: http::HeaderValue,
    /// Flow control: weight, queue bound, classes, default TTFT objective.
    pub flow: TenantFlow,
    /// The tenant's configured limits. With shared state in Redis these hold across the
    /// fleet, and [`Self::limiter`] holds this gateway's fallback share of them.
    pub limits: TenantLimits,
    /// Rate limiter state (this gateway's own).
    pub limiter: Arc<TenantLimiter>,
    key_hashes: Vec<[u8; 32]>,
    /// Root hash seeds of this tenant's namespace per checkpoint, computed once each.
    seeds: Mutex<Vec<(CheckpointId, RootSeed)>>,
    /// Regions its requests may be processed in (empty: any); shared with the hot-prefix
    /// history (`crate::rollout::hot`) without a copy.
    pub residency: Arc<[RegionId]>,
    /// The seed of its prompts' keys in the hot-prefix history
    /// ([`router_policy::sticky_seed`] of [`Self::salt`]), computed once.
    pub sticky_seed: RootSeed,
}

/// Most checkpoints whose root seeds a tenant keeps (a replica set serves a few at once).
const MAX_CACHED_SEEDS: usize = 16;

impl Tenant {
    fn new(
        id: Arc<str>,
        models: Vec<String>,
        salt: CacheSalt,
        (limits, limiter): (TenantLimits, Arc<TenantLimiter>),
        key_hashes: Vec<[u8; 32]>,
        residency: Arc<[RegionId]>,
        flow: TenantFlow,
    ) -> Self {
        Self {
            flow,
            id,
            residency,
            limits,
            models,
            salt_header: crate::headers::text(salt.as_str()),
            sticky_seed: router_policy::sticky_seed(Some(&salt)),
            salt,
            limiter,
            key_hashes,
            seeds: Mutex::new(Vec::new()),
        }
    }

    /// The root seed of this tenant's block hashes for `checkpoint` (the shared hashing
    /// contract: checkpoint and salt in the seed).
    pub(crate) fn root_seed(&self, checkpoint: &CheckpointId) -> RootSeed {
        let mut seeds = self.seeds.lock();
        if let Some((_, s)) = seeds.iter().find(|(c, _)| c == checkpoint) {
            return *s;
        }
        let seed = HashNamespace::new(checkpoint.clone())
            .with_salt(Some(self.salt.clone()))
            .root_seed();
        if seeds.len() >= MAX_CACHED_SEEDS {
            seeds.remove(0);
        }
        seeds.push((checkpoint.clone(), seed));
        seed
    }

    /// Whether this tenant may use `model`.
    pub(crate) fn allows(&self, model: &str) -> bool {
        self.models.iter().any(|m| m == "*" || m == model)
    }
}

/// All tenants, built from config.
#[derive(Debug)]
pub(crate) struct TenantTable {
    auth: bool,
    tenants: Vec<Arc<Tenant>>,
    /// Keys that matched a stored hash, by their keyed SipHash (see the module docs).
    /// Each entry carries the key store's stamp it was verified at ([`KeyView::stamp`]:
    /// the store's random id and its epoch, never repeated after Redis loses its data):
    /// one from another stamp is checked again, so a revocation reaches remembered keys.
    verified: RwLock<VerifiedKeys>,
    /// The SipHash key of [`Self::verified`], random per table.
    prf_key: [u8; 16],
}

/// Verified keys by their keyed SipHash: the tenant, and the key store stamp it was
/// verified at (`None` without shared state).
type VerifiedKeys = HashMap<u128, (Arc<Tenant>, Option<Stamp>), BuildHasherDefault<PrfHasher>>;

/// Hashes a `u128` that is already a PRF output by taking its low 64 bits.
#[derive(Default)]
struct PrfHasher(u64);

impl Hasher for PrfHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        // Only `write_u128` is used; fold anything else in so the hasher stays correct.
        for &b in bytes {
            self.0 = self.0.rotate_left(8) ^ u64::from(b);
        }
    }
    fn write_u128(&mut self, v: u128) {
        self.0 = v as u64;
    }
}

/// The limits this gateway enforces alone. In memory mode, the tenant's limits. With
/// shared state, its fallback share for when Redis is away: each limit divided by the
/// fleet's `gateway_count`, rounded up so no limit falls to zero (which means unlimited).
pub(crate) fn local_share(limits: &TenantLimits, state: &StateConfig) -> TenantLimits {
    let n = match state.backend {
        StateBackend::Memory => return limits.clone(),
        StateBackend::Redis => state.gateway_count.max(1),
    };
    TenantLimits {
        requests_per_minute: limits.requests_per_minute.div_ceil(n),
        request_burst: limits.request_burst.div_ceil(n),
        tokens_per_minute: limits.tokens_per_minute.div_ceil(u64::from(n)),
        max_concurrent: limits.max_concurrent.div_ceil(n),
    }
}

/// SHA-256 of an API key, hex (what the config stores).
pub fn hash_key(key: &str) -> String {
    hex::encode(Sha256::digest(key.as_bytes()))
}

/// The cache salt of a tenant: HMAC-SHA256(secret, tenant id), first 128 bits as hex.
pub fn derive_salt(secret: &str, tenant: &str) -> CacheSalt {
    let mut mac = <Hmac<Sha256> as Mac>::new_from_slice(secret.as_bytes())
        .expect("HMAC accepts keys of any length");
    mac.update(b"warmpath.cache-salt.v1\0");
    mac.update(tenant.as_bytes());
    let out = mac.finalize().into_bytes();
    CacheSalt::new(hex::encode(&out[..16]))
}

/// A tenant's residency pin as typed region ids.
fn residency(t: &TenantConfig) -> Arc<[RegionId]> {
    t.regions
        .iter()
        .map(|r| RegionId::new(r.as_str()))
        .collect()
}

impl TenantTable {
    /// Builds the table. `previous` (the table before a reload) keeps each remaining
    /// tenant's limiter state: the tenant itself when nothing changed, its limiter when
    /// only keys, models or salt did, and a limiter carrying its state over
    /// ([`TenantLimiter::carried_from`]) when its limits changed.
    pub(crate) fn build(cfg: &Config, previous: Option<&TenantTable>) -> TenantTable {
        let secret = cfg.auth.salt_secret.as_str();
        let mut tenants = Vec::new();
        if !cfg.auth.enabled {
            tenants.push(Arc::new(Tenant::new(
                LOCAL_TENANT.into(),
                vec!["*".into()],
                derive_salt(secret, LOCAL_TENANT),
                (
                    TenantLimits::default(),
                    Arc::new(TenantLimiter::new(&TenantLimits::default())),
                ),
                Vec::new(),
                Arc::from(Vec::new()),
                TenantFlow::default(),
            )));
        }
        for t in &cfg.tenants {
            let local = local_share(&t.limits, &cfg.state);
            if let Some(prev) = previous.and_then(|p| p.reuse(t, &local, secret)) {
                tenants.push(prev);
                continue;
            }
            let limiter = previous
                .and_then(|p| p.limiter_for(t, &local))
                .unwrap_or_else(|| Arc::new(TenantLimiter::new(&local)));
            tenants.push(Arc::new(Tenant::new(
                t.id.as_str().into(),
                t.models.clone(),
                derive_salt(secret, &t.id),
                (t.limits.clone(), limiter),
                decode_hashes(&t.api_key_sha256),
                residency(t),
                t.flow.clone(),
            )));
        }
        TenantTable {
            auth: cfg.auth.enabled,
            tenants,
            verified: RwLock::default(),
            prf_key: rand::random(),
        }
    }

    fn reuse(&self, t: &TenantConfig, local: &TenantLimits, secret: &str) -> Option<Arc<Tenant>> {
        let old = self.tenants.iter().find(|o| *o.id == *t.id)?;
        let same = old.limits == t.limits
            && old.limiter.limits() == local
            && old.models == t.models
            && old.key_hashes == decode_hashes(&t.api_key_sha256)
            && old.salt == derive_salt(secret, &t.id)
            && old.residency == residency(t)
            && old.flow == t.flow;
        same.then(|| old.clone())
    }

    /// The limiter a reloaded tenant `t` continues with, if it existed before.
    fn limiter_for(&self, t: &TenantConfig, local: &TenantLimits) -> Option<Arc<TenantLimiter>> {
        let old = self.tenants.iter().find(|o| *o.id == *t.id)?;
        Some(if old.limiter.limits() == local {
            old.limiter.clone()
        } else {
            Arc::new(TenantLimiter::carried_from(local, &old.limiter))
        })
    }

    /// Authenticates an `Authorization` header value against the config's keys.
    #[cfg(test)]
    pub(crate) fn authenticate(
        &self,
        authorization: Option<&[u8]>,
    ) -> Result<Arc<Tenant>, GatewayError> {
        self.authenticate_with(authorization, None)
    }

    /// Authenticates an `Authorization` header value against the config's keys and, with
    /// shared state, the key store as this gateway last read it (`keys`): a key the store
    /// revoked is refused even when the config lists it, and a key made through the admin
    /// API works for its tenant when the config has that tenant. Until the store has been
    /// read once every key is refused with [`GatewayError::KeyStoreUnavailable`]: a
    /// config key may have been revoked there.
    pub(crate) fn authenticate_with(
        &self,
        authorization: Option<&[u8]>,
        keys: Option<&KeyView>,
    ) -> Result<Arc<Tenant>, GatewayError> {
        if !self.auth {
            return self
                .tenants
                .first()
                .cloned()
                .ok_or(GatewayError::Unauthorized);
        }
        let value = authorization.ok_or(GatewayError::Unauthorized)?;
        let value = std::str::from_utf8(value).map_err(|_| GatewayError::Unauthorized)?;
        let (scheme, key) = value.split_once(' ').ok_or(GatewayError::Unauthorized)?;
        if !scheme.eq_ignore_ascii_case("bearer") || key.is_empty() || key.contains(' ') {
            return Err(GatewayError::Unauthorized);
        }
        let tag = self.prf(key.as_bytes());
        let stamp = match keys {
            Some(k) => Some(k.stamp().ok_or(GatewayError::KeyStoreUnavailable)?),
            None => None,
        };
        if let Some((t, at)) = self.verified.read().get(&tag) {
            if *at == stamp {
                return Ok(t.clone());
            }
        }
        let digest: [u8; 32] = Sha256::digest(key.as_bytes()).into();
        if keys.is_some_and(|k| k.is_revoked(&digest)) {
            return Err(GatewayError::Unauthorized);
        }
        // Compare against every stored hash without early exit.
        let mut found: Option<&Arc<Tenant>> = None;
        for t in &self.tenants {
            for h in &t.key_hashes {
                if bool::from(h.ct_eq(&digest)) {
                    found = Some(t);
                }
            }
        }
        let stored = || self.get(&keys?.tenant_of(&digest)?);
        let tenant = found
            .or_else(stored)
            .cloned()
            .ok_or(GatewayError::Unauthorized)?;
        self.verified.write().insert(tag, (tenant.clone(), stamp));
        Ok(tenant)
    }

    /// The config's keys as (tenant, SHA-256), to reconcile a shared key store with.
    pub(crate) fn config_keys(&self) -> Vec<(String, [u8; 32])> {
        self.tenants
            .iter()
            .flat_map(|t| t.key_hashes.iter().map(|h| (t.id.to_string(), *h)))
            .collect()
    }

    /// The tenant with id `id`.
    pub(crate) fn get(&self, id: &str) -> Option<&Arc<Tenant>> {
        self.tenants.iter().find(|t| *t.id == *id)
    }

    /// The keyed SipHash-2-4 of a presented key.
    fn prf(&self, key: &[u8]) -> u128 {
        let mut h = SipHasher24::new_with_key(&self.prf_key);
        h.write(key);
        h.finish128().as_u128()
    }

    /// How many keys are remembered as verified.
    #[cfg(test)]
    fn verified_len(&self) -> usize {
        self.verified.read().len()
    }
}

fn decode_hashes(hexes: &[String]) -> Vec<[u8; 32]> {
    hexes
        .iter()
        .filter_map(|h| hex::decode(h).ok())
        .filter_map(|v| <[u8; 32]>::try_from(v.as_slice()).ok())
        .collect()
}

#[cfg(test)]
mod tests;

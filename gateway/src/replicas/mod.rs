//! The replica set: registration (info + tokenizer discovery), per-replica state (load,
//! in-flight, health), and the background tasks that follow each replica.
//!
//! # Layout
//! - [`client`]: the control-plane HTTP client.
//! - [`health`]: passive ejection and half-open re-admission.
//! - [`tasks`]: KV event follower, load poller and active prober, one set per replica.

pub mod client;
pub mod health;
pub mod tasks;

pub use client::ReplicaAddr;
pub use health::{HealthState, HealthView};

use crate::config::TokenizerConfig;
use crate::routing::Router;
use crate::tokenize::CachedTokenizer;
use http::HeaderValue;
use parking_lot::{Mutex, RwLock};
use router_policy::{CheckpointId, Health, ReplicaId, ReplicaSnapshot};
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::Notify;
use warmpath_protocol::replica_api::{ReplicaInfo, ReplicaLoad, PATH_INFO, PATH_TOKENIZER};
use warmpath_text::TokenizerSpec;

/// One registered replica.
#[derive(Debug)]
pub struct Replica {
    /// Dense id, assigned at registration.
    pub id: ReplicaId,
    /// Where it listens.
    pub addr: ReplicaAddr,
    /// The id as text (`r0`, ...): metric label and response header, formatted once.
    pub label: String,
    /// [`Self::label`] as a header value.
    pub label_header: HeaderValue,
    /// `host:port` as the upstream `Host` header value.
    pub host_header: HeaderValue,
    /// The socket address when the host is an IP literal (no per-request parsing or lookup).
    pub socket_addr: Option<std::net::SocketAddr>,
    /// What it serves (discovered at registration).
    pub info: ReplicaInfo,
    /// Tokenizer shared by every replica of the checkpoint.
    pub tokenizer: Arc<CachedTokenizer>,
    /// Last polled load.
    pub load: Mutex<ReplicaLoad>,
    /// Requests the gateway has in flight to it.
    in_flight: AtomicU32,
    /// Health / ejection state.
    pub health: Mutex<HealthState>,
    /// Draining: no new requests.
    pub draining: AtomicBool,
    /// Removed: background tasks stop.
    pub removed: AtomicBool,
}

impl Replica {
    /// A replica with fresh load, health and in-flight state.
    pub fn new(
        id: ReplicaId,
        addr: ReplicaAddr,
        info: ReplicaInfo,
        tokenizer: Arc<CachedTokenizer>,
    ) -> Result<Self, RegisterError> {
        let label = id.to_string();
        let header = |v: &str| {
            HeaderValue::from_str(v)
                .map_err(|_| RegisterError::Url(format!("{v:?}: not a valid header value")))
        };
        let authority = addr.authority();
        Ok(Self {
            id,
            label_header: header(&label)?,
            host_header: header(&authority)?,
            socket_addr: authority.parse().ok(),
            label,
            addr,
            info,
            tokenizer,
            load: Mutex::new(ReplicaLoad::default()),
            in_flight: AtomicU32::new(0),
            health: Mutex::new(HealthState::default()),
            draining: AtomicBool::new(false),
            removed: AtomicBool::new(false),
        })
    }

    /// Requests in flight from this gateway.
    pub fn in_flight(&self) -> u32 {
        self.in_flight.load(Ordering::Acquire)
    }

    /// Whether a request may be sent here now: not draining, and healthy or half-open.
    pub fn routable(&self, now: std::time::Instant) -> bool {
        !self.draining.load(Ordering::Acquire) && self.health.lock().routable(now)
    }

    /// The snapshot a policy sees.
    pub fn snapshot(&self, now: std::time::Instant) -> ReplicaSnapshot {
        let load = self.load.lock().clone();
        let health = if self.draining.load(Ordering::Acquire) {
            Health::Draining
        } else if self.health.lock().routable(now) {
            Health::Healthy
        } else {
            Health::Unhealthy
        };
        ReplicaSnapshot {
            id: self.id,
            health,
            checkpoint: self.info.checkpoint.clone(),
            region: self.info.region.clone(),
            running: load.running,
            waiting: load.waiting,
            queued_prefill_tokens: load.queued_prefill_tokens,
            in_flight: self.in_flight(),
            kv_used_blocks: load.kv_used_blocks,
            kv_capacity_blocks: if load.kv_total_blocks > 0 {
                load.kv_total_blocks
            } else {
                self.info.capacity_blocks
            },
            prefill_tokens_per_s: load.prefill_tokens_per_s,
        }
    }
}

/// A held in-flight slot on a replica; released on drop.
#[derive(Debug)]
pub struct Slot {
    replica: Arc<Replica>,
    freed: Arc<Notify>,
}

impl Slot {
    /// The replica this slot is on.
    pub fn replica(&self) -> &Arc<Replica> {
        &self.replica
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        self.replica.in_flight.fetch_sub(1, Ordering::AcqRel);
        self.freed.notify_waiters();
    }
}

/// Registration failure.
#[derive(Debug, thiserror::Error)]
pub enum RegisterError {
    /// Bad URL.
    #[error("{0}")]
    Url(String),
    /// Discovery request failed.
    #[error("cannot reach {url}{path}: {source}")]
    Discovery {
        /// Replica URL.
        url: String,
        /// Endpoint.
        path: &'static str,
        /// Cause.
        source: client::ClientError,
    },
    /// The replica hashes with another scheme version.
    #[error("replica {0} uses hash scheme {1}, the gateway uses {2}")]
    Scheme(String, u32, u32),
    /// The tokenizer spec does not build.
    #[error("replica {0} tokenizer: {1}")]
    Tokenizer(String, String),
    /// Already registered.
    #[error("replica {0} is already registered")]
    Duplicate(String),
}

/// All replicas.
pub struct Registry {
    replicas: RwLock<Vec<Arc<Replica>>>,
    next_id: AtomicU32,
    tokenizers: Mutex<HashMap<CheckpointId, Arc<CachedTokenizer>>>,
    freed: Arc<Notify>,
}

impl std::fmt::Debug for Registry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Registry")
            .field("replicas", &self.replicas.read().len())
            .finish()
    }
}

impl Default for Registry {
    fn default() -> Self {
        Self::new()
    }
}

impl Registry {
    /// An empty registry.
    pub fn new() -> Self {
        Self {
            replicas: RwLock::new(Vec::new()),
            next_id: AtomicU32::new(0),
            tokenizers: Mutex::new(HashMap::new()),
            freed: Arc::new(Notify::new()),
        }
    }

    /// Every registered replica (draining included).
    pub fn all(&self) -> Vec<Arc<Replica>> {
        self.replicas.read().clone()
    }

    /// The replica with id `id`.
    pub fn get(&self, id: ReplicaId) -> Option<Arc<Replica>> {
        self.replicas.read().iter().find(|r| r.id == id).cloned()
    }

    /// Discovers a replica's info and tokenizer, registers it and starts its tasks.
    /// The caller starts the replica's background tasks ([`tasks::spawn_all`]).
    pub async fn register(
        &self,
        url: &str,
        tok_cfg: &TokenizerConfig,
    ) -> Result<Arc<Replica>, RegisterError> {
        let addr = ReplicaAddr::parse(url).map_err(RegisterError::Url)?;
        if self.replicas.read().iter().any(|r| r.addr == addr) {
            return Err(RegisterError::Duplicate(addr.url()));
        }
        let timeout = Duration::from_secs(10);
        let info: ReplicaInfo =
            client::get_json(&addr, PATH_INFO, timeout)
                .await
                .map_err(|source| RegisterError::Discovery {
                    url: addr.url(),
                    path: PATH_INFO,
                    source,
                })?;
        if info.hash_scheme != router_policy::SCHEME_VERSION {
            return Err(RegisterError::Scheme(
                addr.url(),
                info.hash_scheme,
                router_policy::SCHEME_VERSION,
            ));
        }
        let existing = self.tokenizers.lock().get(&info.checkpoint).cloned();
        let tokenizer = match existing {
            Some(t) => t,
            None => {
                let spec: TokenizerSpec = client::get_json(&addr, PATH_TOKENIZER, timeout)
                    .await
                    .map_err(|source| RegisterError::Discovery {
                        url: addr.url(),
                        path: PATH_TOKENIZER,
                        source,
                    })?;
                let t =
                    CachedTokenizer::new(&spec, tok_cfg.cache_entries, tok_cfg.min_cached_bytes)
                        .map_err(|e| RegisterError::Tokenizer(addr.url(), e.to_string()))?;
                self.tokenizers
                    .lock()
                    .entry(info.checkpoint.clone())
                    .or_insert_with(|| Arc::new(t))
                    .clone()
            }
        };
        self.insert(addr, info, tokenizer)
    }

    /// Registers a replica whose info and tokenizer are already known (no discovery).
    pub fn insert(
        &self,
        addr: ReplicaAddr,
        info: ReplicaInfo,
        tokenizer: Arc<CachedTokenizer>,
    ) -> Result<Arc<Replica>, RegisterError> {
        let id = ReplicaId(self.next_id.fetch_add(1, Ordering::AcqRel));
        let replica = Arc::new(Replica::new(id, addr, info, tokenizer)?);
        {
            let mut list = self.replicas.write();
            if list.iter().any(|r| r.addr == replica.addr) {
                return Err(RegisterError::Duplicate(replica.addr.url()));
            }
            list.push(replica.clone());
        }
        tracing::info!(replica = %replica.id, url = %replica.addr.url(), model = %replica.info.model,
            checkpoint = %replica.info.checkpoint, block_size = replica.info.block_size.0, "registered replica");
        Ok(replica)
    }

    /// Stops sending new requests to a replica; in-flight ones finish.
    pub fn drain(&self, id: ReplicaId) -> bool {
        match self.get(id) {
            Some(r) => {
                r.draining.store(true, Ordering::Release);
                true
            }
            None => false,
        }
    }

    /// Removes a replica: it leaves routing and the index; its tasks stop.
    pub fn remove(&self, id: ReplicaId, router: &Router) -> bool {
        let mut list = self.replicas.write();
        let Some(pos) = list.iter().position(|r| r.id == id) else {
            return false;
        };
        let r = list.remove(pos);
        r.removed.store(true, Ordering::Release);
        drop(list);
        router.forget_replica(id);
        true
    }

    /// Models served by at least one replica, sorted.
    pub fn models(&self) -> Vec<String> {
        let mut m: Vec<String> = self
            .replicas
            .read()
            .iter()
            .map(|r| r.info.model.clone())
            .collect();
        m.sort();
        m.dedup();
        m
    }

    /// The replicas that may serve `model` now: one checkpoint (the one with the most
    /// routable replicas; ties go to the lexically greatest id, i.e. usually the newest),
    /// not draining. `None` when no replica serves the model at all.
    pub fn candidates(
        &self,
        model: &str,
        now: std::time::Instant,
    ) -> Option<(CheckpointId, Vec<Arc<Replica>>)> {
        let list = self.replicas.read();
        let serving = || list.iter().filter(|r| r.info.model == model);
        let first = serving().next()?;
        let best = if serving().all(|r| r.info.checkpoint == first.info.checkpoint) {
            // The usual case: one checkpoint per model, nothing to count.
            first.info.checkpoint.clone()
        } else {
            // Mid-rollout: the checkpoint with the most routable replicas. A replica set has
            // few checkpoints, so a small vector beats a hash map here.
            let mut counts: Vec<(&CheckpointId, usize)> = Vec::with_capacity(2);
            for r in serving() {
                let ok = r.routable(now);
                match counts.iter_mut().find(|(c, _)| *c == &r.info.checkpoint) {
                    Some((_, n)) => *n += usize::from(ok),
                    None => counts.push((&r.info.checkpoint, usize::from(ok))),
                }
            }
            counts
                .iter()
                .max_by(|a, b| a.1.cmp(&b.1).then(a.0.cmp(b.0)))
                .map(|(c, _)| (*c).clone())?
        };
        let reps = serving()
            .filter(|r| r.info.checkpoint == best && !r.draining.load(Ordering::Acquire))
            .cloned()
            .collect();
        Some((best, reps))
    }

    /// Takes an in-flight slot on `r` if it is below `max`.
    pub fn try_acquire(&self, r: &Arc<Replica>, max: u32) -> Option<Slot> {
        let prev = r.in_flight.fetch_add(1, Ordering::AcqRel);
        let slot = Slot {
            replica: r.clone(),
            freed: self.freed.clone(),
        };
        if prev >= max {
            drop(slot);
            return None;
        }
        Some(slot)
    }

    /// Waits until some slot is released (or `timeout` passes).
    pub async fn wait_for_free_slot(&self, timeout: Duration) -> bool {
        tokio::time::timeout(timeout, self.freed.notified())
            .await
            .is_ok()
    }

    /// Counts replicas currently ejected.
    pub fn ejected_count(&self, now: std::time::Instant) -> usize {
        self.replicas
            .read()
            .iter()
            .filter(|r| !r.health.lock().routable(now))
            .count()
    }

    /// Number of registered replicas.
    pub fn len(&self) -> usize {
        self.replicas.read().len()
    }

    /// True when no replica is registered.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

//! One registered replica: where it listens, what it serves, its polled load, its health
//! and the requests the gateway has in flight to it.

use super::addr::ReplicaAddr;
use super::health::HealthState;
use super::pending::{CacheTruth, PendingPrefill};
use crate::config::{EngineKind, KvEventsEndpoint};
use crate::encoder::PromptEncoder;
use http::HeaderValue;
use parking_lot::Mutex;
use router_policy::{Health, ReplicaSnapshot};
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::Arc;
use warmpath_core::{RegionId, ReplicaId};
use warmpath_protocol::replica_api::{ReplicaInfo, ReplicaLoad};

/// Why a replica could not join the set.
#[derive(Debug, thiserror::Error)]
pub(crate) enum InsertError {
    /// Its address does not make a valid header value.
    #[error("{0}")]
    Url(String),
    /// Already registered.
    #[error("replica {0} is already registered")]
    Duplicate(String),
}

/// What kind of server a replica is and how the gateway follows it.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct UpstreamMeta {
    /// The engine it runs.
    pub engine: EngineKind,
    /// Every model name it serves (`info.model` first).
    pub models: Vec<String>,
    /// Its pool, if it came from one.
    pub pool: Option<String>,
    /// Its ZeroMQ KV event endpoint (vLLM, SGLang).
    pub kv_events: Option<KvEventsEndpoint>,
    /// Whether to read its load from its Prometheus `/metrics`.
    pub scrape_metrics: bool,
    /// What its pool adds to the hash namespace (tenant salt as `cache_salt`, adapters).
    pub namespace: crate::engines::namespace::EngineNamespace,
}

impl UpstreamMeta {
    /// A Warmpath replica serving `model`.
    pub(crate) fn warmpath(model: &str) -> Self {
        Self {
            engine: EngineKind::Warmpath,
            models: vec![model.to_string()],
            pool: None,
            kv_events: None,
            scrape_metrics: false,
            namespace: Default::default(),
        }
    }
}

/// One registered replica.
#[derive(Debug)]
pub(crate) struct Replica {
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
    /// Its region (`info.region` as a typed id, made once).
    pub region: Option<RegionId>,
    /// Its shared KV tier's region (`info.kv_store_region` as a typed id, made once).
    pub kv_store_region: Option<RegionId>,
    /// Prompt encoder (tokenizer, or text units) shared by every replica of the checkpoint.
    pub tokenizer: Arc<PromptEncoder>,
    /// The engine it runs, and how the gateway follows it.
    pub upstream: UpstreamMeta,
    /// Last polled load.
    pub load: Mutex<ReplicaLoad>,
    /// Requests the gateway has in flight to it.
    pub(super) in_flight: AtomicU32,
    /// Prompt tokens sent whose response has not started (see [`super::pending`]).
    pub pending_prefill: PendingPrefill,
    /// How much of the predicted cache the engine really reuses (see [`super::pending`]).
    pub cache_truth: CacheTruth,
    /// Health / ejection state.
    pub health: Mutex<HealthState>,
    /// Draining: no new requests.
    pub draining: AtomicBool,
    /// Removed: background tasks stop.
    pub removed: AtomicBool,
    /// The LoRA adapters it has loaded, as far as the gateway knows.
    pub adapters: super::adapters::AdapterTracker,
}

impl Replica {
    /// A replica with fresh load, health and in-flight state.
    pub(crate) fn new(
        id: ReplicaId,
        addr: ReplicaAddr,
        info: ReplicaInfo,
        tokenizer: Arc<PromptEncoder>,
        upstream: UpstreamMeta,
    ) -> Result<Self, InsertError> {
        let label = id.to_string();
        let header = |v: &str| {
            HeaderValue::from_str(v)
                .map_err(|_| InsertError::Url(format!("{v:?}: not a valid header value")))
        };
        let authority = addr.authority();
        Ok(Self {
            id,
            label_header: header(&label)?,
            host_header: header(&authority)?,
            socket_addr: authority.parse().ok(),
            label,
            addr,
            region: info.region.as_deref().map(RegionId::new),
            kv_store_region: info.kv_store_region.as_deref().map(RegionId::new),
            info,
            tokenizer,
            upstream,
            load: Mutex::new(ReplicaLoad::default()),
            in_flight: AtomicU32::new(0),
            pending_prefill: PendingPrefill::default(),
            cache_truth: CacheTruth::default(),
            health: Mutex::new(HealthState::default()),
            draining: AtomicBool::new(false),
            removed: AtomicBool::new(false),
            adapters: Default::default(),
        })
    }

    /// Whether it left the replica set (its background tasks stop).
    pub(crate) fn is_removed(&self) -> bool {
        self.removed.load(Ordering::Acquire)
    }

    /// Whether it serves `model` (any of its names).
    pub(crate) fn serves(&self, model: &str) -> bool {
        self.info.model == model || self.upstream.models.iter().any(|m| m == model)
    }

    /// Requests in flight from this gateway.
    pub(crate) fn in_flight(&self) -> u32 {
        self.in_flight.load(Ordering::Acquire)
    }

    /// Whether a request may be sent here now: not draining, and healthy or half-open.
    pub(crate) fn routable(&self, now: std::time::Instant) -> bool {
        !self.draining.load(Ordering::Acquire) && self.health.lock().routable(now)
    }

    /// The snapshot a policy sees for a request for `model`.
    pub(crate) fn snapshot(&self, now: std::time::Instant, model: &str) -> ReplicaSnapshot {
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
            region: self.region.clone(),
            running: load.running,
            waiting: load.waiting,
            // Warmpath's replica reports its queue exactly; for other engines the prompt
            // tokens this gateway sent and that are not answered yet stand in for it.
            queued_prefill_tokens: if self.upstream.engine == EngineKind::Warmpath {
                load.queued_prefill_tokens
            } else {
                load.queued_prefill_tokens
                    .max(self.pending_prefill.tokens())
            },
            in_flight: self.in_flight(),
            kv_used_blocks: load.kv_used_blocks,
            kv_capacity_blocks: if load.kv_total_blocks > 0 {
                load.kv_total_blocks
            } else {
                self.info.capacity_blocks
            },
            prefill_tokens_per_s: load.prefill_tokens_per_s,
            tier_tokens_per_s: load.tier_tokens_per_s,
            role: self.info.role,
            adapter: self
                .adapters
                .state(self.upstream.namespace.adapter(model), now),
        }
    }
}

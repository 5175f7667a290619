//! A fleet of gateways sharing state in Redis (one server or a Redis Cluster): tenant
//! limits (the admission and settlement scripts that keep them), tenants' API keys, the
//! routing history and checkpoint rollouts.
//!
//! # How a fleet keeps one limit
//! Each admission is one script call (one round trip): the script reads the time with Redis
//! `TIME`, so the gateways' own clocks never matter, and keeps GCRA state per tenant:
//! requests per minute, tokens per minute (reserved at admission, settled at the end with
//! another call off the request path) and concurrency leases that expire on their own if
//! the gateway holding them dies. Every key of a tenant carries the hash tag `{tenant}`, so
//! each script touches one Cluster slot.
//!
//! # When Redis is away
//! A call that fails or runs past `state.timeout_ms` marks the gateway degraded
//! ([`health`]): requests stop waiting on Redis and each tenant is admitted by this
//! gateway's own limiter, built with the tenant's limits divided by `state.gateway_count`.
//! A probe brings shared limits back when Redis answers, without a restart. A Redis that
//! comes back empty starts every tenant from a fresh bucket: at most one extra burst.
//! Settlements (token refunds, lease releases) that Redis missed wait in a bounded queue
//! and are replayed when it answers again; an admission the gateway gave up on is
//! released the same way, so no lease is left held for `state.lease_ttl_s`.
//!
//! # Layout
//! - this module: [`Fleet`], the connection slot, the degraded probe.
//! - [`conn`]: the connection, single server or Cluster; [`preflight`]: the eviction
//!   policy check (at start and on every connect).
//! - [`health`]: the degraded flag, its metric and log line.
//! - [`limits`]: the admission call and the lease a request holds.
//! - [`settlements`]: settling leases, and the queue that keeps settlements Redis missed
//!   until it answers again ([`pending`]: the queue).
//! - [`keys`]: tenants' API keys in Redis: the admin operations and the poll;
//!   [`reconcile`]: the store reconciled with this gateway's config.
//! - [`view`]: each gateway's copy of the key store; [`scripts`]: the Lua scripts.
//! - [`rollouts`]: checkpoint rollouts set through any gateway's admin API.
//! - [`responses`]: Responses API records a follow-up continues from.
//! - [`history`]: the shared routing history (engines without KV events); [`routed`]:
//!   the queue in front of its writer.

pub(crate) mod conn;
pub(crate) mod health;
pub(crate) mod history;
pub(crate) mod keys;
pub(crate) mod limits;
pub(crate) mod pending;
pub(crate) mod preflight;
pub(crate) mod reconcile;
pub(crate) mod responses;
pub(crate) mod rollouts;
pub(crate) mod routed;
pub(crate) mod scripts;
pub(crate) mod settlements;
pub(crate) mod view;

use crate::config::StateConfig;
use crate::metrics::FleetMetrics;
use conn::Conn;
use health::Health;
use parking_lot::RwLock;
use redis::{FromRedisValue, ScriptInvocation};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// This gateway's handle on the fleet's shared state.
pub(crate) struct Fleet {
    cfg: StateConfig,
    conn: RwLock<Option<Conn>>,
    health: Health,
    probing: AtomicBool,
    /// Runtime of the background calls (probes, settlements).
    handle: tokio::runtime::Handle,
    scripts: scripts::Scripts,
    /// This gateway's random tag (16 hex digits): lease ids and routing-history entries.
    tag: String,
    lease_seq: AtomicU64,
    /// This gateway's copy of the key store.
    keys: view::KeyView,
    /// The config's keys (tenant, SHA-256), reconciled into the store.
    seed: RwLock<Vec<(String, [u8; 32])>>,
    /// Whether the next poll reconciles the store with [`Self::seed`] (start, reload).
    reconcile_due: AtomicBool,
    /// Settlements waiting for Redis.
    pending: pending::Pending,
    /// Routing decisions waiting for the history writer.
    routes: tokio::sync::mpsc::Sender<routed::Routed>,
}

impl std::fmt::Debug for Fleet {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Fleet")
            .field("degraded", &self.health.is_degraded())
            .finish()
    }
}

impl Fleet {
    /// Starts connecting to `cfg`'s Redis in the background on `handle`; until the first
    /// connection the gateway is degraded.
    /// `seed` is the config's keys (tenant, SHA-256) the store is reconciled with.
    pub(crate) fn start(
        cfg: StateConfig,
        handle: tokio::runtime::Handle,
        metrics: FleetMetrics,
        seed: Vec<(String, [u8; 32])>,
    ) -> Arc<Self> {
        let (routes, routes_rx) = routed::queue();
        let fleet = Arc::new(Self {
            routes,
            cfg,
            conn: RwLock::new(None),
            health: Health::new(metrics),
            probing: AtomicBool::new(false),
            handle,
            scripts: scripts::Scripts::new(),
            tag: format!("{:016x}", rand::random::<u64>()),
            lease_seq: AtomicU64::new(0),
            keys: view::KeyView::default(),
            seed: RwLock::new(seed),
            reconcile_due: AtomicBool::new(true),
            pending: pending::Pending::default(),
        });
        fleet.probe();
        fleet.follow_keys();
        fleet.write_routes(routes_rx);
        fleet
    }

    /// The state configuration.
    pub(crate) fn config(&self) -> &StateConfig {
        &self.cfg
    }

    /// Whether Redis is unreachable now.
    pub(crate) fn is_degraded(&self) -> bool {
        self.health.is_degraded()
    }

    /// The shared-state metrics.
    pub(crate) fn metrics(&self) -> &FleetMetrics {
        self.health.metrics()
    }

    /// The key of one piece of a tenant's state, tagged so all of it shares a slot.
    fn key(&self, tenant: &str, what: &str) -> String {
        format!("{}:{{{tenant}}}:{what}", self.cfg.key_prefix)
    }

    fn next_lease(&self) -> String {
        let n = self.lease_seq.fetch_add(1, Ordering::Relaxed);
        format!("{}-{n}", self.tag)
    }

    fn timeout(&self) -> Duration {
        Duration::from_millis(self.cfg.timeout_ms)
    }

    /// The bound of a call off the request path (key admin, routing history): the request
    /// timeout, but at least `floor_ms`.
    fn background_timeout(&self, floor_ms: u64) -> Duration {
        Duration::from_millis(self.cfg.timeout_ms.max(floor_ms))
    }

    /// The connection, when there is one and Redis answers.
    fn live_conn(&self) -> Option<Conn> {
        if self.health.is_degraded() {
            return None;
        }
        self.conn.read().clone()
    }

    /// Runs a script within the timeout. Degraded, it sends nothing
    /// ([`Unanswered::NotSent`]); a call that fails or runs past the timeout marks the
    /// gateway degraded ([`Unanswered::Lost`]: it may still have run on Redis).
    async fn call<T: FromRedisValue>(
        self: &Arc<Self>,
        call: &ScriptInvocation<'_>,
    ) -> Result<T, Unanswered> {
        let conn = self.live_conn().ok_or(Unanswered::NotSent)?;
        let started = Instant::now();
        match within(self.timeout(), conn.invoke(call)).await {
            Ok(v) => {
                self.metrics()
                    .redis_seconds
                    .observe(started.elapsed().as_secs_f64());
                Ok(v)
            }
            Err(e) => {
                self.failed(&e);
                Err(Unanswered::Lost)
            }
        }
    }

    /// Marks the gateway degraded and starts the probe.
    fn failed(self: &Arc<Self>, why: &dyn std::fmt::Display) {
        if self.health.fail(why) {
            self.probe();
        }
    }

    /// Until Redis answers a `PING` (connecting first if need be): waits `probe_ms`,
    /// tries again. One probe runs at a time.
    fn probe(self: &Arc<Self>) {
        if self.probing.swap(true, Ordering::AcqRel) {
            return;
        }
        let fleet = self.clone();
        self.handle.spawn(async move {
            let every = Duration::from_millis(fleet.cfg.probe_ms);
            loop {
                if fleet.try_once().await {
                    // The key store first: a gateway that just started refuses every key
                    // until it has read the store's revocations once.
                    let conn = fleet.conn.read().clone();
                    if let Some(conn) = conn {
                        if let Err(e) = fleet.sync_keys(&conn).await {
                            tracing::debug!(error = %e, "key store read after reconnect failed");
                        }
                    }
                    fleet.health.recover();
                    fleet.replay_settlements();
                    break;
                }
                tokio::time::sleep(every).await;
            }
            fleet.probing.store(false, Ordering::Release);
            // A failure between the recovery and the flag's reset found `probing` set.
            if fleet.health.is_degraded() {
                fleet.probe();
            }
        });
    }

    async fn try_once(&self) -> bool {
        let existing = self.conn.read().clone();
        let conn = match existing {
            Some(c) => c,
            None => match within(Duration::from_secs(2), Conn::connect(&self.cfg)).await {
                Ok(c) => {
                    let limit = Duration::from_secs(2);
                    match preflight::check_policy(&c, limit).await {
                        Err(e @ preflight::PolicyError::Evicting(_)) => {
                            tracing::error!("{e}: not used");
                            return false;
                        }
                        Err(e) => tracing::debug!("{e}"),
                        Ok(()) => {}
                    }
                    *self.conn.write() = Some(c.clone());
                    c
                }
                Err(e) => {
                    tracing::debug!(error = %e, "Redis connect failed");
                    return false;
                }
            },
        };
        let ping = redis::cmd("PING");
        within(self.timeout(), conn.query::<String>(&ping))
            .await
            .is_ok()
    }
}

/// Why a script call has no answer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Unanswered {
    /// Degraded: nothing was sent.
    NotSent,
    /// Sent, and it failed or ran past the timeout: it may have run on Redis.
    Lost,
}

/// A Redis call bounded by `limit`; a timeout is an error like any other, named.
async fn within<T>(
    limit: Duration,
    call: impl std::future::Future<Output = redis::RedisResult<T>>,
) -> Result<T, String> {
    match tokio::time::timeout(limit, call).await {
        Ok(Ok(v)) => Ok(v),
        Ok(Err(e)) => Err(e.to_string()),
        Err(_) => Err(format!("no answer within {} ms", limit.as_millis())),
    }
}

//! Shared gateway state: configuration (swappable on reload), replicas, router, tenants,
//! metrics. One `Arc<AppState>` is shared by the proxy, the admin API and the background
//! tasks.

use crate::config::Config;
use crate::metrics::Metrics;
use crate::replicas::health::{max_ejected, FailureOutcome};
use crate::replicas::{tasks, RegisterError, Registry, Replica};
use crate::retry::RetryBudget;
use crate::routing::Router;
use crate::tenants::TenantTable;
use parking_lot::RwLock;
use router_policy::{Millis, ReplicaId};
use std::sync::atomic::AtomicU32;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Everything the gateway shares across requests and tasks.
pub struct AppState {
    config: RwLock<Arc<Config>>,
    tenants: RwLock<Arc<TenantTable>>,
    /// Replica set.
    pub registry: Registry,
    /// Prefix index + policy.
    pub router: Router,
    /// Metrics.
    pub metrics: Metrics,
    /// Dashboard-only counters (per-replica and per-tenant tokens, history).
    pub dashboard: crate::dashboard::Recorder,
    /// Gateway-wide retry budget.
    pub retry_budget: RetryBudget,
    /// Requests waiting for a replica slot.
    pub queued: AtomicU32,
    /// Control-plane runtime (event followers, pollers, probes).
    pub control: tokio::runtime::Handle,
    started: Instant,
}

impl std::fmt::Debug for AppState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AppState")
            .field("registry", &self.registry)
            .finish()
    }
}

impl AppState {
    /// State for a validated config; replicas are added separately.
    pub fn new(config: Config, control: tokio::runtime::Handle) -> Arc<Self> {
        let tenants = TenantTable::build(&config, None);
        let router = Router::new(&config.policy, config.decision_log);
        let now = Instant::now();
        Arc::new(Self {
            config: RwLock::new(Arc::new(config)),
            tenants: RwLock::new(Arc::new(tenants)),
            registry: Registry::new(),
            router,
            metrics: Metrics::new(),
            dashboard: crate::dashboard::Recorder::default(),
            retry_budget: RetryBudget::new(now),
            queued: AtomicU32::new(0),
            control,
            started: now,
        })
    }

    /// The current configuration.
    pub fn config(&self) -> Arc<Config> {
        self.config.read().clone()
    }

    /// The current tenant table.
    pub fn tenants(&self) -> Arc<TenantTable> {
        self.tenants.read().clone()
    }

    /// Milliseconds since start (the router's clock).
    pub fn now_millis(&self) -> Millis {
        self.millis_at(Instant::now())
    }

    /// [`Self::now_millis`] at an instant already read.
    pub fn millis_at(&self, at: Instant) -> Millis {
        Millis(at.saturating_duration_since(self.started).as_millis() as u64)
    }

    /// Registers a replica and starts following it.
    pub async fn add_replica(self: &Arc<Self>, url: &str) -> Result<Arc<Replica>, RegisterError> {
        let tok = self.config().tokenizer.clone();
        let r = self.registry.register(url, &tok).await?;
        tasks::spawn_all(self, r.clone());
        Ok(r)
    }

    /// Removes a replica from routing and the index.
    pub fn remove_replica(&self, id: ReplicaId) -> bool {
        self.registry.remove(id, &self.router)
    }

    /// Applies a new validated config without dropping requests: tenants (limiter state kept
    /// where unchanged), policy, limits, and replicas (new URLs added, missing ones drained).
    pub async fn reload(self: &Arc<Self>, new: Config) {
        let old = self.config();
        if new.listen != old.listen
            || new.admin_listen != old.admin_listen
            || new.threads != old.threads
            || new.limits.max_requests_per_connection != old.limits.max_requests_per_connection
        {
            tracing::warn!(
                "listen addresses, threads and limits.max_requests_per_connection cannot change \
                 on reload; restart to apply them"
            );
        }
        let tenants = TenantTable::build(&new, Some(&self.tenants()));
        *self.tenants.write() = Arc::new(tenants);
        if new.policy != old.policy {
            self.router.set_policy(&new.policy);
        }
        let urls = new.replicas.clone();
        *self.config.write() = Arc::new(new);
        for url in &urls {
            let known = self
                .registry
                .all()
                .iter()
                .any(|r| r.addr.url() == url.trim_end_matches('/'));
            if !known {
                if let Err(e) = self.add_replica(url).await {
                    tracing::warn!(%url, error = %e, "reload: cannot add replica");
                }
            }
        }
        for r in self.registry.all() {
            if !old
                .replicas
                .iter()
                .any(|u| u.trim_end_matches('/') == r.addr.url())
            {
                continue; // added through the admin API: keep it
            }
            if !urls.iter().any(|u| u.trim_end_matches('/') == r.addr.url()) {
                tracing::info!(replica = %r.id, "reload: draining replica removed from config");
                self.registry.drain(r.id);
            }
        }
        tracing::info!("configuration reloaded");
    }

    /// Records the result of a request or probe against a replica's health.
    pub fn report(&self, r: &Replica, ok: bool) {
        if ok {
            if r.health.lock().record_success() {
                self.metrics
                    .readmissions
                    .with_label_values(&[&r.id.to_string()])
                    .inc();
                tracing::info!(replica = %r.id, "replica re-admitted");
            }
            return;
        }
        let cfg = self.config();
        let now = Instant::now();
        let may_eject = self.registry.ejected_count(now)
            < max_ejected(self.registry.len(), cfg.health.max_ejected_ratio);
        let outcome = r.health.lock().record_failure(
            now,
            cfg.health.eject_after_failures,
            Duration::from_millis(cfg.health.ejection_ms),
            may_eject,
        );
        if outcome == FailureOutcome::Ejected {
            self.metrics
                .ejections
                .with_label_values(&[&r.id.to_string()])
                .inc();
            tracing::warn!(replica = %r.id, url = %r.addr.url(), "replica ejected");
        }
    }
}

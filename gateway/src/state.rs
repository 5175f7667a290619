//! Shared gateway state: configuration (swappable on reload), replicas, router, tenants,
//! metrics. One `Arc<AppState>` is shared by the proxy, the admin API and the background
//! tasks.

use crate::config::Config;
use crate::metrics::Metrics;
use crate::replicas::health::{max_ejected, FailureOutcome};
use crate::replicas::{Registry, Replica};
use crate::retry::RetryBudget;
use crate::routing::Router;
use crate::tenants::TenantTable;
use parking_lot::RwLock;
use std::sync::atomic::AtomicU32;
use std::sync::Arc;
use std::time::{Duration, Instant};
use warmpath_core::Millis;

/// Everything the gateway shares across requests and tasks.
pub(crate) struct AppState {
    config: RwLock<Arc<Config>>,
    tenants: RwLock<Arc<TenantTable>>,
    /// Replica set.
    pub registry: Registry,
    /// Prefix index + policy.
    pub router: Router,
    /// Metrics.
    pub metrics: Metrics,
    /// Dashboard-only counters (per-replica and per-tenant tokens, history).
    pub dashboard: crate::dashboard::recorder::Recorder,
    /// Gateway-wide retry budget.
    pub retry_budget: RetryBudget,
    /// Requests waiting for a replica slot.
    pub queued: AtomicU32,
    /// The flow queues they wait in (fair, priority- and deadline-aware).
    pub flow: crate::flow::FlowGate,
    /// Request body bytes held in flight (`limits.max_inflight_body_bytes`).
    pub bodies: crate::body::budget::BodyBudget,
    /// Long requests parsed and tokenized at once, off the event loop (one per worker
    /// thread; `crate::tokenize::gate`).
    pub long_prompts: crate::tokenize::gate::LongPrompts,
    /// Control-plane runtime (event followers, pollers, probes).
    pub control: tokio::runtime::Handle,
    /// The fleet's shared state in Redis (`state.backend: redis`); fixed at start.
    pub fleet: Option<Arc<crate::fleet::Fleet>>,
    /// Checkpoint rollouts in force and the hot prefixes they pre-warm from.
    pub rollouts: crate::rollout::Rollouts,
    /// Responses API records a follow-up (`previous_response_id`) continues from.
    pub responses: crate::api::responses::store::Store,
    started: Instant,
}

impl std::fmt::Debug for AppState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AppState")
            .field("registry", &self.registry)
            .finish()
    }
}

/// Model names the config's tenant allowlists name.
fn configured_models(config: &Config) -> impl Iterator<Item = &str> {
    config
        .tenants
        .iter()
        .flat_map(|t| t.models.iter().map(String::as_str))
}

impl AppState {
    /// State for a validated config; replicas are added separately.
    pub(crate) fn new(config: Config, control: tokio::runtime::Handle) -> Arc<Self> {
        let tenants = TenantTable::build(&config, None);
        let router = Router::new(&config.policy, config.decision_log);
        let now = Instant::now();
        let threads = config.threads;
        let metrics = Metrics::new();
        metrics.set_configured_models(configured_models(&config));
        let fleet = (config.state.backend == crate::config::StateBackend::Redis).then(|| {
            crate::fleet::Fleet::start(
                config.state.clone(),
                control.clone(),
                metrics.fleet.clone(),
                tenants.config_keys(),
            )
        });
        let rollouts = crate::rollout::Rollouts::new(&config.hot_prefixes);
        // Put in force now; their pre-warm starts with the control tasks
        // ([`crate::rollout::prewarm::start`]).
        rollouts.apply_config(&config.rollouts, &[]);
        Arc::new(Self {
            fleet,
            rollouts,
            responses: crate::api::responses::store::Store::new(
                config.responses.max_records,
                config.responses.max_bytes,
                config.responses.ttl(),
            ),
            config: RwLock::new(Arc::new(config)),
            tenants: RwLock::new(Arc::new(tenants)),
            registry: Registry::new(),
            router,
            metrics,
            dashboard: crate::dashboard::recorder::Recorder::default(),
            retry_budget: RetryBudget::new(now),
            queued: AtomicU32::new(0),
            flow: crate::flow::FlowGate::default(),
            bodies: crate::body::budget::BodyBudget::default(),
            long_prompts: crate::tokenize::gate::LongPrompts::new(threads),
            control,
            started: now,
        })
    }

    /// The current configuration.
    pub(crate) fn config(&self) -> Arc<Config> {
        self.config.read().clone()
    }

    /// The current tenant table.
    pub(crate) fn tenants(&self) -> Arc<TenantTable> {
        self.tenants.read().clone()
    }

    /// Milliseconds since start (the router's clock).
    pub(crate) fn now_millis(&self) -> Millis {
        self.millis_at(Instant::now())
    }

    /// [`Self::now_millis`] at an instant already read.
    pub(crate) fn millis_at(&self, at: Instant) -> Millis {
        Millis(at.saturating_duration_since(self.started).as_millis() as u64)
    }

    /// Replaces the configuration (a reload; [`crate::control::reload`]), and with it the
    /// model names metrics may use as labels.
    pub(crate) fn set_config(&self, config: Config) {
        self.metrics
            .set_configured_models(configured_models(&config));
        *self.config.write() = Arc::new(config);
    }

    /// Replaces the tenant table (a reload).
    pub(crate) fn set_tenants(&self, tenants: TenantTable) {
        if let Some(f) = &self.fleet {
            f.set_seed_keys(tenants.config_keys());
        }
        *self.tenants.write() = Arc::new(tenants);
    }

    /// Records the result of a request or probe against a replica's health.
    pub(crate) fn report(&self, r: &Replica, ok: bool) {
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

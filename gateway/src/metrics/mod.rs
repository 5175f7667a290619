//! Prometheus metrics, registered once in a private registry and served on the admin
//! listener at `/metrics`.

mod disagg;
mod family;
mod fleet;
mod flow;
mod rollout;

pub(crate) use disagg::DisaggMetrics;
pub(crate) use family::CounterFamily;
pub(crate) use fleet::FleetMetrics;
pub(crate) use flow::FlowMetrics;
pub(crate) use rollout::RolloutMetrics;

use parking_lot::RwLock;
use prometheus::{
    Encoder, Histogram, HistogramOpts, HistogramVec, IntCounter, IntCounterVec, IntGauge, Opts,
    Registry, TextEncoder,
};
use router_policy::Branch;
use std::collections::HashMap;

/// Label sets resolved once per process: the hot path looks its series up here (one small
/// map probe) instead of hashing label values through `with_label_values` every time.
/// Bounded: past [`MAX_CACHED_SERIES`] keys the vector is asked directly. Keys are label
/// values the gateway's own config and requests produce, looked up on every request: the
/// map hashes them with foldhash (a few instructions for a short key) instead of SipHash.
struct SeriesCache<K, V> {
    map: RwLock<HashMap<K, V, foldhash::fast::RandomState>>,
}

/// Most label sets a [`SeriesCache`] keeps.
const MAX_CACHED_SERIES: usize = 4096;

impl<K: std::hash::Hash + Eq, V: Clone> SeriesCache<K, V> {
    fn new() -> Self {
        Self {
            map: RwLock::new(HashMap::default()),
        }
    }

    fn get<Q>(&self, key: &Q, to_key: impl FnOnce() -> K, make: impl FnOnce() -> V) -> V
    where
        K: std::borrow::Borrow<Q>,
        Q: std::hash::Hash + Eq + ?Sized,
    {
        if let Some(v) = self.map.read().get(key) {
            return v.clone();
        }
        let v = make();
        let mut w = self.map.write();
        if w.len() < MAX_CACHED_SERIES {
            w.insert(to_key(), v.clone());
        }
        v
    }
}

/// The per-model series the end of every request touches.
#[derive(Clone)]
pub(crate) struct ModelSeries {
    /// `predicted_cached_tokens_total{model}`.
    pub predicted_cached_tokens: IntCounter,
    /// `actual_cached_tokens_total{model}`.
    pub actual_cached_tokens: IntCounter,
    /// `tier_cached_tokens_total{model}`.
    pub tier_cached_tokens: IntCounter,
    /// `prompt_tokens_total{model}`.
    pub prompt_tokens: IntCounter,
    /// `cache_prediction_error_tokens{model}`.
    pub prediction_error: Histogram,
}

/// The per-tenant token series the end of every request with usage touches.
#[derive(Clone)]
pub(crate) struct TenantSeries {
    /// `tenant_tokens_total{tenant, kind="prompt"}`.
    pub prompt: IntCounter,
    /// `tenant_tokens_total{tenant, kind="completion"}`.
    pub completion: IntCounter,
    /// `tenant_tokens_total{tenant, kind="cached"}` (prompt tokens served from a replica's cache).
    pub cached: IntCounter,
}

use crate::body::request::Endpoint;
use crate::config::PassthroughApi;
use crate::outcome::Outcome;

/// Every metric the gateway exports.
pub(crate) struct Metrics {
    registry: Registry,
    /// Requests by tenant, model, replica and status.
    pub requests: CounterFamily<4>,
    /// Requests by API (`chat`, `completions`, `responses`, ...) and status.
    pub api_requests: IntCounterVec,
    /// Routing decisions by policy and branch.
    pub routing_branches: IntCounterVec,
    /// Prompt tokens the gateway predicted cached, by model.
    pub predicted_cached_tokens: IntCounterVec,
    /// Prompt tokens the replica reported cached, by model.
    pub actual_cached_tokens: IntCounterVec,
    /// Of those, prompt tokens the replica loaded from the shared KV tier, by model.
    pub tier_cached_tokens: IntCounterVec,
    /// Prompt tokens of requests with a reported usage, by model.
    pub prompt_tokens: IntCounterVec,
    /// |predicted - actual| cached tokens per request.
    pub prediction_error: HistogramVec,
    /// Retries by reason.
    pub retries: IntCounterVec,
    /// Retries refused by the budget.
    pub retry_budget_exhausted: IntCounter,
    /// Ejections by replica.
    pub ejections: IntCounterVec,
    /// Re-admissions by replica.
    pub readmissions: IntCounterVec,
    /// Tenant limit rejections by tenant and kind.
    pub limit_rejections: IntCounterVec,
    /// `passthrough_requests_total{api, status}`: embeddings, tokenize and detokenize
    /// requests routed to a replica, by the status the client got.
    pub passthrough_requests: IntCounterVec,
    /// Requests shed by admission control.
    pub shed: IntCounter,
    /// Connections refused by the per-IP cap.
    pub connections_refused: IntCounter,
    /// Streams ended with a gateway error event.
    pub stream_errors: IntCounterVec,
    /// `stream_migrations_total{outcome}`: streams whose replica failed mid-stream.
    pub stream_migrations: IntCounterVec,
    /// From a stream's failure to its continuation's first event.
    pub migration_resume_seconds: Histogram,
    /// Requests queued for a replica slot.
    pub queued: IntGauge,
    /// Request body bytes held in flight (`limits.max_inflight_body_bytes`), set at scrape.
    pub inflight_body_bytes: IntGauge,
    /// KV events applied, by observation.
    pub kv_events: IntCounterVec,
    /// `tenant_tokens_total{tenant, kind}`.
    pub tenant_tokens: IntCounterVec,
    /// `route_latency_seconds{stage="tokenize_hash"}`.
    pub route_tokenize_hash: Histogram,
    /// `route_latency_seconds{stage="select"}`.
    pub route_select: Histogram,
    /// The shared-state (Redis) series.
    pub fleet: FleetMetrics,
    /// Rollout and region series.
    pub rollout: RolloutMetrics,
    /// Prefill/decode split series.
    pub disagg: DisaggMetrics,
    /// Flow control series (per tenant and class).
    pub flow: FlowMetrics,
    added_latency_by_endpoint: [Histogram; 5],
    /// `added_latency_seconds{endpoint="messages"}`: Anthropic's Messages API, translated
    /// to a chat (`crate::api::messages`).
    pub added_latency_messages: Histogram,
    branches: SeriesCache<(&'static str, Branch), IntCounter>,
    models: SeriesCache<String, ModelSeries>,
    tenants: SeriesCache<String, TenantSeries>,
    known_models: KnownModels,
}

/// The label a model name the gateway does not know gets: clients choose the `model` of a
/// request, so only configured or served names become label values.
pub(crate) const OTHER_MODEL: &str = "other";

/// Model names that may be label values: those named in tenants' allowlists (replaced on
/// reload) and those replicas serve (added at registration).
#[derive(Default)]
struct KnownModels {
    configured: RwLock<std::collections::HashSet<String, foldhash::fast::RandomState>>,
    served: RwLock<std::collections::HashSet<String, foldhash::fast::RandomState>>,
}

impl Metrics {
    /// Creates and registers every metric.
    pub(crate) fn new() -> Self {
        let registry =
            Registry::new_custom(Some("warmpath_gateway".into()), None).unwrap_or_default();
        let cv = |name: &str, help: &str, labels: &[&str]| {
            let c = IntCounterVec::new(Opts::new(name, help), labels).expect("valid metric");
            registry
                .register(Box::new(c.clone()))
                .expect("unique metric");
            c
        };
        let c = |name: &str, help: &str| {
            let c = IntCounter::new(name, help).expect("valid metric");
            registry
                .register(Box::new(c.clone()))
                .expect("unique metric");
            c
        };
        let h = |name: &str, help: &str, labels: &[&str], buckets: Vec<f64>| {
            let h = HistogramVec::new(HistogramOpts::new(name, help).buckets(buckets), labels)
                .expect("valid metric");
            registry
                .register(Box::new(h.clone()))
                .expect("unique metric");
            h
        };
        let lat_buckets = vec![
            0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25,
            1.0,
        ];
        // Tenant ids and model names are free text: an `IntCounterVec` would merge label
        // sets that concatenate alike (see `family`).
        let requests = CounterFamily::new(
            "requests_total",
            "Requests by tenant, model, replica and status",
            ["tenant", "model", "replica", "status"],
        )
        .expect("valid metric");
        registry
            .register(Box::new(requests.clone()))
            .expect("unique metric");
        let added_latency = h(
            "added_latency_seconds",
            "Gateway time before the upstream request is sent",
            &["endpoint"],
            lat_buckets.clone(),
        );
        let route_latency = h(
            "route_latency_seconds",
            "Tokenize + hash + policy time",
            &["stage"],
            lat_buckets,
        );
        let migration_resume = h(
            "stream_migration_resume_seconds",
            "From a stream's failure to the first event of its continuation",
            &[],
            vec![0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0],
        );
        Self {
            migration_resume_seconds: migration_resume.with_label_values(&[]),
            fleet: FleetMetrics::register(&registry),
            rollout: RolloutMetrics::register(&registry),
            disagg: DisaggMetrics::register(&registry),
            flow: FlowMetrics::register(&registry),
            route_tokenize_hash: route_latency.with_label_values(&["tokenize_hash"]),
            route_select: route_latency.with_label_values(&["select"]),
            added_latency_messages: added_latency.with_label_values(&["messages"]),
            added_latency_by_endpoint: [
                added_latency.with_label_values(&[Endpoint::Chat.as_str()]),
                added_latency.with_label_values(&[Endpoint::Completions.as_str()]),
                added_latency.with_label_values(&[PassthroughApi::Embeddings.as_str()]),
                added_latency.with_label_values(&[PassthroughApi::Tokenize.as_str()]),
                added_latency.with_label_values(&[PassthroughApi::Detokenize.as_str()]),
            ],
            branches: SeriesCache::new(),
            models: SeriesCache::new(),
            tenants: SeriesCache::new(),
            known_models: KnownModels::default(),
            requests,
            api_requests: cv(
                "api_requests_total",
                "Finished API requests by API and status",
                &["api", "status"],
            ),
            routing_branches: cv(
                "routing_decisions_total",
                "Routing decisions by policy and branch",
                &["policy", "branch"],
            ),
            predicted_cached_tokens: cv(
                "predicted_cached_tokens_total",
                "Prompt tokens predicted cached",
                &["model"],
            ),
            actual_cached_tokens: cv(
                "actual_cached_tokens_total",
                "Prompt tokens the replica reported cached",
                &["model"],
            ),
            tier_cached_tokens: cv(
                "tier_cached_tokens_total",
                "Prompt tokens the replica loaded from the shared KV tier (part of the cached tokens)",
                &["model"],
            ),
            prompt_tokens: cv(
                "prompt_tokens_total",
                "Prompt tokens of requests with usage",
                &["model"],
            ),
            prediction_error: h(
                "cache_prediction_error_tokens",
                "Absolute difference between predicted and reported cached tokens",
                &["model"],
                vec![0.0, 16.0, 64.0, 256.0, 1024.0, 4096.0, 16384.0],
            ),
            retries: cv("retries_total", "Upstream retries by reason", &["reason"]),
            retry_budget_exhausted: c(
                "retry_budget_exhausted_total",
                "Retries refused by the retry budget",
            ),
            ejections: cv("ejections_total", "Replica ejections", &["replica"]),
            readmissions: cv("readmissions_total", "Replica re-admissions", &["replica"]),
            limit_rejections: cv(
                "limit_rejections_total",
                "Tenant limit rejections",
                &["tenant", "kind"],
            ),
            passthrough_requests: cv(
                "passthrough_requests_total",
                "Pass-through requests (embeddings, tokenize, detokenize) routed to a replica, by API and status",
                &["api", "status"],
            ),
            shed: c("shed_total", "Requests shed by admission control (503)"),
            connections_refused: c(
                "connections_refused_total",
                "Connections refused by limits.max_connections_per_ip (429, closed)",
            ),
            stream_errors: cv(
                "stream_errors_total",
                "Streams ended with a terminal error event",
                &["reason"],
            ),
            stream_migrations: cv(
                "stream_migrations_total",
                "Streams whose replica failed after the first byte: ok (continued and completed on another replica), failed (continued, then failed), refused (not continued)",
                &["outcome"],
            ),
            queued: {
                let g = IntGauge::new("queued_requests", "Requests waiting for a replica slot")
                    .expect("valid metric");
                registry
                    .register(Box::new(g.clone()))
                    .expect("unique metric");
                g
            },
            inflight_body_bytes: {
                let g = IntGauge::new(
                    "inflight_body_bytes",
                    "Request body bytes the gateway holds for requests in flight",
                )
                .expect("valid metric");
                registry
                    .register(Box::new(g.clone()))
                    .expect("unique metric");
                g
            },
            kv_events: cv(
                "kv_event_messages_total",
                "KV stream messages by observation",
                &["observation"],
            ),
            tenant_tokens: cv(
                "tenant_tokens_total",
                "Tokens used per tenant by kind (prompt, completion, cached), from replica usage",
                &["tenant", "kind"],
            ),
            registry,
        }
    }

    /// The per-tenant token series.
    pub(crate) fn tenant(&self, tenant: &str) -> TenantSeries {
        self.tenants.get(
            tenant,
            || tenant.to_string(),
            || TenantSeries {
                prompt: self.tenant_tokens.with_label_values(&[tenant, "prompt"]),
                completion: self
                    .tenant_tokens
                    .with_label_values(&[tenant, "completion"]),
                cached: self.tenant_tokens.with_label_values(&[tenant, "cached"]),
            },
        )
    }

    /// `added_latency_seconds{endpoint}`.
    pub(crate) fn added_latency_for(&self, endpoint: Endpoint) -> &Histogram {
        match endpoint {
            Endpoint::Chat => &self.added_latency_by_endpoint[0],
            Endpoint::Completions => &self.added_latency_by_endpoint[1],
            Endpoint::Passthrough(api) => &self.added_latency_by_endpoint[2 + api as usize],
        }
    }

    /// `routing_decisions_total{policy, branch}`.
    pub(crate) fn routing_branch(&self, policy: &'static str, branch: Branch) -> IntCounter {
        self.branches.get(
            &(policy, branch),
            || (policy, branch),
            || {
                self.routing_branches
                    .with_label_values(&[policy, branch.as_str()])
            },
        )
    }

    /// Replaces the configured model names (tenants' allowlists; `*` is not a name).
    pub(crate) fn set_configured_models<'a>(&self, models: impl IntoIterator<Item = &'a str>) {
        let set = models
            .into_iter()
            .filter(|m| *m != "*")
            .map(str::to_string)
            .collect();
        *self.known_models.configured.write() = set;
    }

    /// Adds a model name a replica serves.
    pub(crate) fn add_served_model(&self, model: &str) {
        if !self.known_models.served.read().contains(model) {
            self.known_models.served.write().insert(model.to_string());
        }
    }

    /// `model` when configured or served, else [`OTHER_MODEL`].
    pub(crate) fn model_label<'a>(&self, model: &'a str) -> &'a str {
        let k = &self.known_models;
        if k.served.read().contains(model) || k.configured.read().contains(model) {
            model
        } else {
            OTHER_MODEL
        }
    }

    /// The per-model cached-token series.
    pub(crate) fn model(&self, model: &str) -> ModelSeries {
        self.models.get(
            model,
            || model.to_string(),
            || ModelSeries {
                predicted_cached_tokens: self.predicted_cached_tokens.with_label_values(&[model]),
                actual_cached_tokens: self.actual_cached_tokens.with_label_values(&[model]),
                tier_cached_tokens: self.tier_cached_tokens.with_label_values(&[model]),
                prompt_tokens: self.prompt_tokens.with_label_values(&[model]),
                prediction_error: self.prediction_error.with_label_values(&[model]),
            },
        )
    }

    /// `requests_total{tenant, model, replica, status}`.
    pub(crate) fn request(
        &self,
        tenant: &str,
        model: &str,
        replica: &str,
        status: u16,
    ) -> IntCounter {
        let mut digits = itoa::Buffer::new();
        self.requests
            .with_label_values([tenant, model, replica, digits.format(status)])
    }

    /// Counts one finished request: `requests_total`, the tenant's token series, and the
    /// model's predicted against reported cached tokens.
    pub(crate) fn record(&self, o: &Outcome<'_>) {
        let tenant = o.tenant.unwrap_or("");
        let model = self.model_label(o.model);
        self.request(tenant, model, o.replica_label(), o.status)
            .inc();
        let checkpoint = o.replica.map(|r| r.info.checkpoint.as_str());
        if let Some(ck) = checkpoint {
            let labels = [model, ck];
            self.rollout
                .checkpoint_requests
                .with_label_values(&labels)
                .inc();
            if let Some(u) = o.usage {
                let r = &self.rollout;
                r.checkpoint_prompt_tokens
                    .with_label_values(&labels)
                    .inc_by(u.prompt_tokens);
                r.checkpoint_cached_tokens
                    .with_label_values(&labels)
                    .inc_by(u.cached_tokens.unwrap_or(0));
            }
        }
        let Some(u) = o.usage else { return };
        if !tenant.is_empty() {
            let t = self.tenant(tenant);
            t.prompt.inc_by(u.prompt_tokens);
            t.completion.inc_by(u.completion_tokens);
            t.cached.inc_by(u.cached_tokens.unwrap_or(0));
        }
        if let (Some(actual), Some(predicted)) = (u.cached_tokens, o.predicted_cached_tokens) {
            let m = self.model(model);
            m.predicted_cached_tokens.inc_by(predicted);
            m.actual_cached_tokens.inc_by(actual);
            m.tier_cached_tokens
                .inc_by(o.tier_cached_tokens.unwrap_or(0).min(actual));
            m.prompt_tokens.inc_by(u.prompt_tokens);
            m.prediction_error
                .observe(predicted.abs_diff(actual) as f64);
        }
    }

    /// `rollout_prewarm_total{model, outcome}`.
    pub(crate) fn rollout_prewarm(&self, model: &str, outcome: &str) -> IntCounter {
        self.rollout
            .prewarm
            .with_label_values(&[self.model_label(model), outcome])
    }

    /// Text exposition format.
    pub(crate) fn render(&self) -> Vec<u8> {
        let mut out = Vec::new();
        let _ = TextEncoder::new().encode(&self.registry.gather(), &mut out);
        out
    }
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_request_label_set_counts_in_its_own_series() {
        let m = Metrics::new();
        m.request("ab", "c", "r0", 200).inc();
        m.request("ab", "c", "r0", 200).inc();
        m.request("a", "bc", "r0", 200).inc();
        m.request("ab", "c", "r0", 503).inc();
        let text = String::from_utf8(m.render()).unwrap();
        let count = |tenant: &str, model: &str, status: &str| {
            let labels = format!(
                "{{model=\"{model}\",replica=\"r0\",status=\"{status}\",tenant=\"{tenant}\"}}"
            );
            text.lines()
                .find(|l| l.contains("requests_total{") && l.contains(&labels))
                .and_then(|l| l.rsplit(' ').next())
                .map(str::to_string)
        };
        assert_eq!(count("ab", "c", "200").as_deref(), Some("2"), "{text}");
        assert_eq!(count("a", "bc", "200").as_deref(), Some("1"), "{text}");
        assert_eq!(count("ab", "c", "503").as_deref(), Some("1"), "{text}");
    }

    #[test]
    fn only_configured_or_served_models_become_labels() {
        let m = Metrics::new();
        m.set_configured_models(["allowed", "*"]);
        m.add_served_model("served");
        assert_eq!(m.model_label("allowed"), "allowed");
        assert_eq!(m.model_label("served"), "served");
        assert_eq!(m.model_label("*"), OTHER_MODEL);
        assert_eq!(m.model_label("made-up-by-a-client"), OTHER_MODEL);
        m.set_configured_models(["renamed"]);
        assert_eq!(m.model_label("allowed"), OTHER_MODEL);
        assert_eq!(m.model_label("served"), "served");
    }
}

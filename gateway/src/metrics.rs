//! Prometheus metrics, registered once in a private registry and served on the admin
//! listener at `/metrics`.

use prometheus::{
    Encoder, HistogramOpts, HistogramVec, IntCounter, IntCounterVec, IntGauge, Opts, Registry,
    TextEncoder,
};

/// Every metric the gateway exports.
pub struct Metrics {
    registry: Registry,
    /// Requests by tenant, model, replica and status.
    pub requests: IntCounterVec,
    /// Routing decisions by policy and branch.
    pub routing_branches: IntCounterVec,
    /// Prompt tokens the gateway predicted cached, by model.
    pub predicted_cached_tokens: IntCounterVec,
    /// Prompt tokens the replica reported cached, by model.
    pub actual_cached_tokens: IntCounterVec,
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
    /// Requests shed by admission control.
    pub shed: IntCounter,
    /// Streams ended with a gateway error event.
    pub stream_errors: IntCounterVec,
    /// Time from request arrival to the upstream request being sent.
    pub added_latency: HistogramVec,
    /// Time in tokenize + hash + route.
    pub route_latency: HistogramVec,
    /// Requests queued for a replica slot.
    pub queued: IntGauge,
    /// KV events applied, by observation.
    pub kv_events: IntCounterVec,
}

impl Metrics {
    /// Creates and registers every metric.
    pub fn new() -> Self {
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
        Self {
            requests: cv(
                "requests_total",
                "Requests by tenant, model, replica and status",
                &["tenant", "model", "replica", "status"],
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
            shed: c("shed_total", "Requests shed by admission control (503)"),
            stream_errors: cv(
                "stream_errors_total",
                "Streams ended with a terminal error event",
                &["reason"],
            ),
            added_latency: h(
                "added_latency_seconds",
                "Gateway time before the upstream request is sent",
                &["endpoint"],
                lat_buckets.clone(),
            ),
            route_latency: h(
                "route_latency_seconds",
                "Tokenize + hash + policy time",
                &["stage"],
                lat_buckets,
            ),
            queued: {
                let g = IntGauge::new("queued_requests", "Requests waiting for a replica slot")
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
            registry,
        }
    }

    /// Text exposition format.
    pub fn render(&self) -> Vec<u8> {
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

//! Prometheus metrics of the replica (`GET /metrics`).

use prometheus::{
    Encoder, Gauge, Histogram, HistogramOpts, IntCounter, IntCounterVec, IntGauge, Opts, Registry,
    TextEncoder,
};

/// Every metric the replica exports. Updated by the engine loop once per step.
#[derive(Debug, Clone)]
pub struct Metrics {
    registry: Registry,
    /// Sequences in the running batch.
    pub running: IntGauge,
    /// Sequences waiting for admission.
    pub waiting: IntGauge,
    /// KV pages handed out (cached or private).
    pub kv_pages_used: IntGauge,
    /// KV pages in the pool.
    pub kv_pages_total: IntGauge,
    /// Cached blocks held by running sequences.
    pub kv_blocks_locked: IntGauge,
    /// Prompt tokens served from the prefix cache.
    pub prompt_tokens_cached: IntCounter,
    /// Prompt tokens computed (prefill work, recomputation included).
    pub prompt_tokens_computed: IntCounter,
    /// Generated tokens.
    pub generation_tokens: IntCounter,
    /// Recent prefill throughput.
    pub prefill_tokens_per_s: Gauge,
    /// Recent decode throughput.
    pub decode_tokens_per_s: Gauge,
    /// Time from arrival to the first generated token.
    pub ttft_seconds: Histogram,
    /// Time between consecutive generated tokens of a request.
    pub inter_token_seconds: Histogram,
    /// Sequences preempted (recompute).
    pub preemptions: IntCounter,
    /// Finished requests.
    pub requests_finished: IntCounter,
    /// Requests cancelled by their client.
    pub requests_cancelled: IntCounter,
    /// Requests ended because the model's logits were NaN or infinite.
    pub degenerate: IntCounter,
    /// Engine steps.
    pub steps: IntCounter,
    /// KV transfers a decode replica made, by `outcome` (`ok`, `partial`, `failed`) and
    /// `reason` (what ended the transfer: `complete`, `connect`, `http_status`, `timeout`,
    /// `truncated`, `corrupt`, `mismatch`, `import`).
    pub kv_transfers: IntCounterVec,
    /// Prompt tokens whose KV a decode replica took from a prefill replica.
    pub kv_transfer_tokens: IntCounter,
    /// Time a decode replica spent fetching and importing KV.
    pub kv_transfer_seconds: Histogram,
    /// KV blocks a prefill replica streamed to decode replicas.
    pub kv_export_blocks: IntCounter,
    /// Shared KV tier lookups, by `outcome` (`hit`, `partial`, `miss`, `skipped`) and
    /// `reason` (what ended the run: `complete`, `absent`, `forged`, `corrupt`,
    /// `mismatch`, `timeout`, `unavailable`, `import`, `busy`, `cached`).
    pub kv_tier_lookups: IntCounterVec,
    /// Prompt tokens whose KV came from the shared tier.
    pub kv_tier_hit_tokens: IntCounter,
    /// Time of a tier lookup and import.
    pub kv_tier_lookup_seconds: Histogram,
    /// Blocks offered to the tier, by `outcome` (`written`, `dropped`: the queue was
    /// full, `failed`: Redis refused or was unreachable).
    pub kv_tier_writes: IntCounterVec,
    /// Record bytes written to the tier.
    pub kv_tier_write_bytes: IntCounter,
    /// Record bytes waiting in the tier's write queue.
    pub kv_tier_queue_bytes: IntGauge,
    /// Failed tier calls, by `op` (`connect`, `read`, `write`).
    pub kv_tier_errors: IntCounterVec,
}

fn counter_vec(r: &Registry, name: &str, help: &str, labels: &[&str]) -> IntCounterVec {
    reg(
        r,
        IntCounterVec::new(Opts::new(name, help), labels).expect("valid metric opts"),
    )
}

fn reg<T: prometheus::core::Collector + Clone + 'static>(r: &Registry, m: T) -> T {
    // Names are unique constants below, so registration cannot collide.
    if let Err(e) = r.register(Box::new(m.clone())) {
        tracing::error!(error = %e, "metric registration failed");
    }
    m
}

fn int_gauge(r: &Registry, name: &str, help: &str) -> IntGauge {
    reg(
        r,
        IntGauge::with_opts(Opts::new(name, help)).expect("valid metric opts"),
    )
}

fn counter(r: &Registry, name: &str, help: &str) -> IntCounter {
    reg(
        r,
        IntCounter::with_opts(Opts::new(name, help)).expect("valid metric opts"),
    )
}

fn gauge(r: &Registry, name: &str, help: &str) -> Gauge {
    reg(
        r,
        Gauge::with_opts(Opts::new(name, help)).expect("valid metric opts"),
    )
}

fn histogram(r: &Registry, name: &str, help: &str, buckets: Vec<f64>) -> Histogram {
    reg(
        r,
        Histogram::with_opts(HistogramOpts::new(name, help).buckets(buckets))
            .expect("valid metric opts"),
    )
}

impl Metrics {
    /// A fresh registry with every metric.
    pub fn new() -> Self {
        let r = Registry::new();
        let latency = vec![
            0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0,
        ];
        Self {
            running: int_gauge(
                &r,
                "warmpath_replica_running",
                "Sequences in the running batch",
            ),
            waiting: int_gauge(
                &r,
                "warmpath_replica_waiting",
                "Sequences waiting for admission",
            ),
            kv_pages_used: int_gauge(
                &r,
                "warmpath_replica_kv_pages_used",
                "KV pages in use (cached or private)",
            ),
            kv_pages_total: int_gauge(
                &r,
                "warmpath_replica_kv_pages_total",
                "KV pages in the pool",
            ),
            kv_blocks_locked: int_gauge(
                &r,
                "warmpath_replica_kv_blocks_locked",
                "Cached blocks held by running sequences",
            ),
            prompt_tokens_cached: counter(
                &r,
                "warmpath_replica_prompt_tokens_cached_total",
                "Prompt tokens served from the prefix cache",
            ),
            prompt_tokens_computed: counter(
                &r,
                "warmpath_replica_prompt_tokens_computed_total",
                "Prompt tokens computed",
            ),
            generation_tokens: counter(
                &r,
                "warmpath_replica_generation_tokens_total",
                "Generated tokens",
            ),
            prefill_tokens_per_s: gauge(
                &r,
                "warmpath_replica_prefill_tokens_per_second",
                "Recent prefill throughput",
            ),
            decode_tokens_per_s: gauge(
                &r,
                "warmpath_replica_decode_tokens_per_second",
                "Recent decode throughput",
            ),
            ttft_seconds: histogram(
                &r,
                "warmpath_replica_time_to_first_token_seconds",
                "Arrival to first token",
                latency.clone(),
            ),
            inter_token_seconds: histogram(
                &r,
                "warmpath_replica_inter_token_seconds",
                "Time between generated tokens",
                vec![
                    0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5,
                ],
            ),
            preemptions: counter(
                &r,
                "warmpath_replica_preemptions_total",
                "Sequences preempted by recompute",
            ),
            requests_finished: counter(
                &r,
                "warmpath_replica_requests_finished_total",
                "Requests finished",
            ),
            requests_cancelled: counter(
                &r,
                "warmpath_replica_requests_cancelled_total",
                "Requests cancelled by the client",
            ),
            degenerate: counter(
                &r,
                "warmpath_replica_degenerate_total",
                "Requests failed on NaN or infinite logits",
            ),
            steps: counter(&r, "warmpath_replica_engine_steps_total", "Engine steps"),
            kv_transfers: reg(
                &r,
                IntCounterVec::new(
                    Opts::new(
                        "warmpath_replica_kv_transfers_total",
                        "KV transfers from prefill replicas, by outcome and reason",
                    ),
                    &["outcome", "reason"],
                )
                .expect("valid metric opts"),
            ),
            kv_transfer_tokens: counter(
                &r,
                "warmpath_replica_kv_transfer_tokens_total",
                "Prompt tokens whose KV came from a prefill replica",
            ),
            kv_transfer_seconds: histogram(
                &r,
                "warmpath_replica_kv_transfer_seconds",
                "Time fetching and importing KV from a prefill replica",
                latency.clone(),
            ),
            kv_export_blocks: counter(
                &r,
                "warmpath_replica_kv_export_blocks_total",
                "KV blocks streamed to decode replicas",
            ),
            kv_tier_lookups: counter_vec(
                &r,
                "warmpath_replica_kv_tier_lookups_total",
                "Shared KV tier lookups, by outcome and reason",
                &["outcome", "reason"],
            ),
            kv_tier_hit_tokens: counter(
                &r,
                "warmpath_replica_kv_tier_hit_tokens_total",
                "Prompt tokens whose KV came from the shared tier",
            ),
            kv_tier_lookup_seconds: histogram(
                &r,
                "warmpath_replica_kv_tier_lookup_seconds",
                "Time looking up and importing KV from the shared tier",
                latency.clone(),
            ),
            kv_tier_writes: counter_vec(
                &r,
                "warmpath_replica_kv_tier_writes_total",
                "KV blocks offered to the shared tier, by outcome",
                &["outcome"],
            ),
            kv_tier_write_bytes: counter(
                &r,
                "warmpath_replica_kv_tier_write_bytes_total",
                "Record bytes written to the shared tier",
            ),
            kv_tier_queue_bytes: int_gauge(
                &r,
                "warmpath_replica_kv_tier_queue_bytes",
                "Record bytes waiting to be written to the shared tier",
            ),
            kv_tier_errors: counter_vec(
                &r,
                "warmpath_replica_kv_tier_errors_total",
                "Failed shared KV tier calls, by operation",
                &["op"],
            ),
            registry: r,
        }
    }

    /// The text exposition format.
    pub fn render(&self) -> String {
        let mut buf = Vec::new();
        if let Err(e) = TextEncoder::new().encode(&self.registry.gather(), &mut buf) {
            tracing::error!(error = %e, "metrics encoding failed");
        }
        String::from_utf8(buf).unwrap_or_default()
    }
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

/// The measured rates' average: weight 0.2 on the newest sample; the first sample (an
/// `old` of 0, nothing measured yet) stands alone.
pub(crate) fn ewma(old: f64, new: f64) -> f64 {
    if old == 0.0 {
        new
    } else {
        0.8 * old + 0.2 * new
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_every_family() {
        let m = Metrics::new();
        m.preemptions.inc();
        m.ttft_seconds.observe(0.2);
        let text = m.render();
        assert!(text.contains("warmpath_replica_preemptions_total 1"));
        assert!(text.contains("warmpath_replica_time_to_first_token_seconds_bucket"));
        assert!(text.contains("warmpath_replica_kv_pages_total"));
    }
}

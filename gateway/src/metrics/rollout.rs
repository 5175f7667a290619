//! Rollout and region series: traffic and cache hits per checkpoint
//! (`checkpoint_requests_total`, `checkpoint_prompt_tokens_total`,
//! `checkpoint_cached_tokens_total`, all `{model, checkpoint}`), the share each rollout
//! gives its new checkpoint (`rollout_share{model}`), pre-warm replays
//! (`rollout_prewarm_total{model, outcome}`) and requests sent out of the gateway's region
//! (`region_spills_total{region, reason}`).

use prometheus::{GaugeVec, IntCounterVec, Opts, Registry};

/// Handles on the rollout and region series.
#[derive(Clone, Debug)]
pub(crate) struct RolloutMetrics {
    /// Requests answered, by model and the checkpoint that served them.
    pub checkpoint_requests: IntCounterVec,
    /// Prompt tokens of requests with reported usage, by model and checkpoint.
    pub checkpoint_prompt_tokens: IntCounterVec,
    /// Prompt tokens the replica reported cached, by model and checkpoint.
    pub checkpoint_cached_tokens: IntCounterVec,
    /// Share of conversations on the new checkpoint, `[0, 1]`, by model.
    pub share: GaugeVec,
    /// Pre-warm replays by model and outcome (`ok`, `failed`).
    pub prewarm: IntCounterVec,
    /// Requests routed out of the gateway's region, by destination region and reason.
    pub spills: IntCounterVec,
}

impl RolloutMetrics {
    /// Creates the series and registers them in `registry`.
    pub(crate) fn register(registry: &Registry) -> Self {
        let cv = |name: &str, help: &str, labels: &[&str]| {
            let c = IntCounterVec::new(Opts::new(name, help), labels).expect("valid metric");
            registry
                .register(Box::new(c.clone()))
                .expect("unique metric");
            c
        };
        let share = GaugeVec::new(
            Opts::new(
                "rollout_share",
                "Share of conversations a model's rollout sends to its new checkpoint",
            ),
            &["model"],
        )
        .expect("valid metric");
        registry
            .register(Box::new(share.clone()))
            .expect("unique metric");
        Self {
            checkpoint_requests: cv(
                "checkpoint_requests_total",
                "Requests answered, by model and the checkpoint that served them",
                &["model", "checkpoint"],
            ),
            checkpoint_prompt_tokens: cv(
                "checkpoint_prompt_tokens_total",
                "Prompt tokens of requests with reported usage, by model and checkpoint",
                &["model", "checkpoint"],
            ),
            checkpoint_cached_tokens: cv(
                "checkpoint_cached_tokens_total",
                "Prompt tokens the replica reported cached, by model and checkpoint",
                &["model", "checkpoint"],
            ),
            share,
            prewarm: cv(
                "rollout_prewarm_total",
                "Rollout pre-warm replays, by model and outcome",
                &["model", "outcome"],
            ),
            spills: cv(
                "region_spills_total",
                "Requests routed out of the gateway's home region, by region and reason",
                &["region", "reason"],
            ),
        }
    }
}

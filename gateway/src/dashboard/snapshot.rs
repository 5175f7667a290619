//! The dashboard's JSON snapshot: replicas, totals, tenants, history, recent decisions,
//! checkpoints and rollouts.

use super::recorder::{unix_ms, HistoryPoint, Recorder, ReplicaTokens};
use super::series::{ratio, series, sum_by, total};
use crate::metrics::Metrics;
use crate::routing::DecisionRecord;
use crate::state::AppState;
use serde::Serialize;
use std::collections::BTreeMap;
use std::sync::atomic::Ordering;
use std::time::Instant;

/// Decisions included in a snapshot.
pub(crate) const DECISIONS: usize = 20;

/// One replica's row.
#[derive(Debug, Serialize)]
pub(crate) struct ReplicaRow {
    /// Dense id.
    pub id: u32,
    /// Metric label (`r0`).
    pub label: String,
    /// Base URL.
    pub url: String,
    /// Model served.
    pub model: String,
    /// Engine it runs (`warmpath`, `vllm`, `sglang`, `llamacpp`, `openai`).
    pub engine: &'static str,
    /// Role in a prefill/decode split (`both`, `prefill`, `decode`).
    pub role: &'static str,
    /// `healthy`, `ejected`, `half_open` or `draining`.
    pub health: String,
    /// Consecutive failures (requests or probes).
    pub consecutive_failures: u32,
    /// Requests the gateway has in flight to it.
    pub in_flight: u32,
    /// Sequences running on the replica (polled).
    pub running: u32,
    /// Requests waiting on the replica (polled).
    pub waiting: u32,
    /// KV blocks in use (polled).
    pub kv_used_blocks: u64,
    /// KV blocks in all (polled).
    pub kv_total_blocks: u64,
    /// `kv_used_blocks / kv_total_blocks`, when known.
    pub kv_usage: Option<f64>,
    /// Blocks the gateway's prefix index attributes to it from its KV events.
    pub indexed_blocks: usize,
    /// Requests routed to it (all statuses).
    pub requests: u64,
    /// Token counters from the responses it returned.
    pub tokens: ReplicaTokens,
    /// Reported cached / prompt tokens, when any prompt tokens were reported (local and
    /// shared tier together).
    pub hit_rate: Option<f64>,
    /// Cached tokens from the replica's own cache / prompt tokens.
    pub local_hit_rate: Option<f64>,
    /// Cached tokens loaded from the shared KV tier / prompt tokens.
    pub tier_hit_rate: Option<f64>,
}

/// One tenant's row.
#[derive(Debug, Default, Serialize)]
pub(crate) struct TenantRow {
    /// Tenant id (`-` for unauthenticated requests).
    pub id: String,
    /// Requests (all statuses).
    pub requests: u64,
    /// Requests rejected by a tenant limit (429).
    pub rejections: u64,
    /// Prompt tokens.
    pub prompt_tokens: u64,
    /// Completion tokens.
    pub completion_tokens: u64,
}

/// Gateway-wide totals.
#[derive(Debug, Default, Serialize)]
pub(crate) struct Totals {
    /// Requests, all statuses.
    pub requests: u64,
    /// Prompt tokens predicted cached.
    pub predicted_cached_tokens: u64,
    /// Prompt tokens the replicas reported cached.
    pub actual_cached_tokens: u64,
    /// Of those, prompt tokens loaded from the shared KV tier.
    pub tier_cached_tokens: u64,
    /// Prompt tokens of requests with reported usage.
    pub prompt_tokens: u64,
    /// `actual_cached_tokens / prompt_tokens`, when any.
    pub hit_rate: Option<f64>,
    /// `(actual_cached_tokens - tier_cached_tokens) / prompt_tokens`: the replicas' own caches.
    pub local_hit_rate: Option<f64>,
    /// `tier_cached_tokens / prompt_tokens`: the shared KV tier.
    pub tier_hit_rate: Option<f64>,
    /// Requests shed by admission control.
    pub shed: u64,
    /// Upstream retries.
    pub retries: u64,
    /// Requests waiting for a replica slot now.
    pub queued: i64,
}

/// Everything the page shows.
#[derive(Debug, Serialize)]
pub(crate) struct Snapshot {
    /// Unix time, milliseconds.
    pub unix_ms: u64,
    /// The running policy.
    pub policy: &'static str,
    /// Totals.
    pub totals: Totals,
    /// Replicas, by id.
    pub replicas: Vec<ReplicaRow>,
    /// Tenants, by id.
    pub tenants: Vec<TenantRow>,
    /// Cumulative cached-token counters over time, oldest first.
    pub history: Vec<HistoryPoint>,
    /// The last routing decisions, newest first.
    pub decisions: Vec<DecisionRecord>,
    /// Traffic and hit rate per (model, checkpoint).
    pub checkpoints: Vec<super::checkpoints::CheckpointRow>,
    /// Rollouts in force.
    pub rollouts: Vec<crate::rollout::RolloutStatus>,
}

/// The current cumulative cached-token counters.
pub(crate) fn history_point(m: &Metrics) -> HistoryPoint {
    HistoryPoint {
        unix_ms: unix_ms(),
        predicted: total(&m.predicted_cached_tokens),
        actual: total(&m.actual_cached_tokens),
        tier: total(&m.tier_cached_tokens),
        prompt: total(&m.prompt_tokens),
    }
}

/// Appends a history point (at most one a second unless `force`).
pub(crate) fn sample_history(recorder: &Recorder, m: &Metrics, force: bool) {
    recorder.sample(Instant::now(), force, || history_point(m));
}

fn tenant_rows(m: &Metrics, recorder: &Recorder) -> Vec<TenantRow> {
    let mut rows: BTreeMap<String, TenantRow> = BTreeMap::new();
    let name = |t: &str| {
        if t.is_empty() {
            "-".to_string()
        } else {
            t.to_string()
        }
    };
    for (labels, v) in series(&m.requests) {
        let id = name(labels.get("tenant").map_or("", String::as_str));
        let row = rows.entry(id.clone()).or_default();
        row.id = id;
        row.requests += v;
    }
    for (tenant, v) in sum_by(&m.limit_rejections, "tenant") {
        let id = name(&tenant);
        let row = rows.entry(id.clone()).or_default();
        row.id = id;
        row.rejections += v;
    }
    for (tenant, t) in recorder.tenants() {
        let row = rows.entry(tenant.clone()).or_default();
        row.id = tenant;
        row.prompt_tokens = t.prompt_tokens;
        row.completion_tokens = t.completion_tokens;
    }
    rows.into_values().collect()
}

fn replica_rows(state: &AppState) -> Vec<ReplicaRow> {
    let now = Instant::now();
    let requests = sum_by(&state.metrics.requests, "replica");
    let tokens = state.dashboard.replicas();
    let mut rows: Vec<ReplicaRow> = state
        .registry
        .all()
        .iter()
        .map(|r| {
            let label = r.id.to_string();
            let load = r.load.lock().clone();
            let health = r.health.lock().view(now);
            let draining = r.draining.load(Ordering::Acquire);
            let t = tokens.get(&label).copied().unwrap_or_default();
            ReplicaRow {
                id: r.id.0,
                url: r.addr.url(),
                model: r.info.model.clone(),
                engine: r.upstream.engine.as_str(),
                role: r.info.role.as_str(),
                health: if draining { "draining" } else { health.state }.to_string(),
                consecutive_failures: health.consecutive_failures,
                in_flight: r.in_flight(),
                running: load.running,
                waiting: load.waiting,
                kv_used_blocks: load.kv_used_blocks,
                kv_total_blocks: load.kv_total_blocks,
                kv_usage: ratio(load.kv_used_blocks, load.kv_total_blocks),
                indexed_blocks: state.router.precise_blocks(r.id),
                requests: requests.get(&label).copied().unwrap_or(0),
                hit_rate: ratio(t.cached_tokens, t.prompt_tokens),
                local_hit_rate: ratio(
                    t.cached_tokens.saturating_sub(t.tier_cached_tokens),
                    t.prompt_tokens,
                ),
                tier_hit_rate: ratio(t.tier_cached_tokens, t.prompt_tokens),
                tokens: t,
                label,
            }
        })
        .collect();
    rows.sort_by_key(|r| r.id);
    rows
}

/// Builds the snapshot (and records a history point when the last is a second old).
pub(crate) fn build(state: &AppState) -> Snapshot {
    sample_history(&state.dashboard, &state.metrics, false);
    let m = &state.metrics;
    let (predicted, actual, tier, prompt) = (
        total(&m.predicted_cached_tokens),
        total(&m.actual_cached_tokens),
        total(&m.tier_cached_tokens),
        total(&m.prompt_tokens),
    );
    let mut decisions = state.router.recent(DECISIONS);
    decisions.reverse();
    let rollouts = state.rollouts.list();
    Snapshot {
        unix_ms: unix_ms(),
        policy: state.router.policy_name(),
        totals: Totals {
            requests: total(&m.requests),
            predicted_cached_tokens: predicted,
            actual_cached_tokens: actual,
            tier_cached_tokens: tier,
            prompt_tokens: prompt,
            hit_rate: ratio(actual, prompt),
            local_hit_rate: ratio(actual.saturating_sub(tier), prompt),
            tier_hit_rate: ratio(tier, prompt),
            shed: m.shed.get(),
            retries: total(&m.retries),
            queued: m.queued.get(),
        },
        replicas: replica_rows(state),
        tenants: tenant_rows(&state.metrics, &state.dashboard),
        history: state.dashboard.history(),
        decisions,
        checkpoints: super::checkpoints::rows(&state.metrics, &state.registry, &rollouts),
        rollouts,
    }
}

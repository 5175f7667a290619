//! `warm`'s cost model for one replica: queue wait, shared-tier fetch, prefill and KV
//! pressure (the formulas are in the module docs of [`super`]).

use super::config::WarmConfig;
use super::state::Seen;
use crate::cluster::{AdapterState, ReplicaSnapshot};
use crate::policy::request::RouteRequest;

/// How much of a request's prompt one replica has where, in blocks.
#[derive(Clone, Copy, Debug, Default)]
pub(super) struct Held {
    /// Leading blocks in its own cache (the index's match).
    pub(super) local: u32,
    /// Blocks after those that it can fetch from the shared tier.
    pub(super) tier: u32,
    /// Blocks the index says it caches in total (for the KV pressure barrier).
    pub(super) cached: u64,
}

/// The cost model's parts for one replica.
#[derive(Clone, Copy, Debug)]
pub(super) struct Cost {
    pub(super) queue_ms: f64,
    /// See [`Seen::settled_ms`].
    pub(super) settled_ms: f64,
    /// Loading the tier's blocks: one lookup plus the tokens at the tier's rate (0 when
    /// it fetches nothing).
    pub(super) fetch_ms: f64,
    pub(super) prefill_ms: f64,
    pub(super) kv_ms: f64,
    /// Loading the request's LoRA adapter first (0 when it is loaded, or none is named).
    pub(super) adapter_ms: f64,
    /// Prefill rate used, tokens per ms.
    pub(super) tokens_per_ms: f64,
    /// Prompt tokens it would compute (neither cached nor fetched).
    pub(super) uncached: u32,
    /// Blocks it would fetch from the shared tier.
    pub(super) tier_blocks: u32,
    /// Round trip from the gateway's region (0 unless regions are weighed).
    pub(super) rtt_ms: f64,
}

impl Cost {
    /// The predicted time to first token (without the round trip).
    pub(super) fn ttft(&self) -> f64 {
        self.queue_ms + self.fetch_ms + self.prefill_ms + self.kv_ms + self.adapter_ms
    }
}

/// What [`cost`] knows of the eligible replicas' prefill rates.
#[derive(Clone, Copy, Debug)]
pub(super) struct PeerRates {
    /// The rate of a replica that has measured none.
    pub(super) fallback: f64,
    /// The peers' mean measured rate and the ratio within which a measured rate counts as
    /// that mean (noise between identical replicas).
    pub(super) noise: Option<(f64, f64)>,
}

impl PeerRates {
    /// The prefill rate to cost `r` at.
    fn of(self, r: &ReplicaSnapshot) -> f64 {
        match (measured_rate(r), self.noise) {
            (Some(x), Some((mean, ratio))) if (x - mean).abs() <= ratio * mean => mean,
            (Some(x), _) => x,
            (None, _) => self.fallback,
        }
    }
}

/// The cost of sending `req` to `r`, which holds `held` of it, at the rate `peers` gives
/// it; `avg_request_tokens` stands in for requests the load report does not show yet.
pub(super) fn cost(
    cfg: &WarmConfig,
    req: &RouteRequest<'_>,
    r: &ReplicaSnapshot,
    seen: Seen,
    held: Held,
    peers: PeerRates,
    avg_request_tokens: f64,
) -> Cost {
    let rate = peers.of(r);
    let tokens_per_ms = rate / 1000.0;
    let bs = u64::from(req.block_size.0.max(1));
    let prompt = u64::from(req.prompt_tokens);
    let hit = (u64::from(held.local) * bs).min(prompt);
    let reach = (u64::from(held.local.saturating_add(held.tier)) * bs).min(prompt);
    let fetched = reach - hit;
    let uncached = prompt - reach;
    let fetch_ms = if fetched == 0 {
        0.0
    } else {
        cfg.tier_lookup_ms + fetched as f64 / tier_rate(cfg, r) * 1000.0
    };
    // The report, aged at the prefill rate since this policy first saw it (the replica
    // kept prefilling since), against the work this policy itself sent, drained the same
    // way: the larger of the two. Without a record of its own, requests the report does
    // not show yet count at the average request size.
    let reported_ms = r.queued_prefill_tokens as f64 / tokens_per_ms;
    let aged_ms = (reported_ms - seen.report_age_ms).max(0.0);
    let queue_ms = match seen.backlog_ms {
        Some(b) => aged_ms.max(b),
        None => aged_ms + f64::from(r.unreported_requests()) * avg_request_tokens / tokens_per_ms,
    };
    let kv_ms = if r.kv_capacity_blocks == 0 {
        0.0
    } else {
        // Fetched blocks take device space like computed ones.
        let pinned = r.kv_used_blocks.saturating_sub(held.cached);
        let k = (pinned + (prompt - hit).div_ceil(bs)) as f64 / r.kv_capacity_blocks as f64;
        let thr = cfg.kv_pressure_threshold;
        if k <= thr {
            0.0
        } else {
            cfg.kv_pressure_weight_ms * (k - thr) / (1.0 - k).max(0.01)
        }
    };
    Cost {
        queue_ms,
        settled_ms: seen.settled_ms,
        fetch_ms,
        prefill_ms: uncached as f64 / tokens_per_ms,
        kv_ms,
        adapter_ms: if r.adapter == AdapterState::NotLoaded {
            cfg.adapter_load_ms
        } else {
            0.0
        },
        tokens_per_ms,
        uncached: u32::try_from(uncached).unwrap_or(u32::MAX),
        tier_blocks: if fetched == 0 { 0 } else { held.tier },
        rtt_ms: 0.0,
    }
}

/// The prefill rate `r` reports, if it has measured one.
pub(super) fn measured_rate(r: &ReplicaSnapshot) -> Option<f64> {
    (r.prefill_tokens_per_s.is_finite() && r.prefill_tokens_per_s > 0.0)
        .then_some(r.prefill_tokens_per_s)
}

/// The tier load rate `r` measured, else the configured default (tokens/s).
fn tier_rate(cfg: &WarmConfig, r: &ReplicaSnapshot) -> f64 {
    if r.tier_tokens_per_s.is_finite() && r.tier_tokens_per_s > 0.0 {
        r.tier_tokens_per_s
    } else {
        cfg.default_tier_tokens_per_s
    }
}

//! `warm` (the default): route by predicted time to first token.
//!
//! For each eligible replica r, with rate = measured prefill tokens/s (or the default):
//!
//! ```text
//! queue_ms(r)    = (queued_prefill_tokens + unreported_requests * avg_request_tokens) / rate
//! prefill_ms(r)  = (prompt_tokens - min(matched_blocks * B, prompt_tokens)) / rate
//! kv_ms(r)       = 0                                   if k <= kv_pressure_threshold
//!                = kv_pressure_weight_ms * (k - thr) / max(1 - k, 0.01)   otherwise
//!                  where k = (kv_used + blocks this prompt adds) / kv_capacity
//! ttft_ms(r)     = queue_ms + prefill_ms + kv_ms
//! ```
//! `unreported_requests` are requests this router sent that the replica's last load report
//! does not show yet (see [`ReplicaSnapshot::unreported_requests`]); `avg_request_tokens` is
//! an exponential average of the uncached tokens of the requests this policy routed.
//!
//! Branches, in order:
//! 1. **cold_home**: nobody holds the first block. Go to the prefix's bounded-load
//!    rendezvous home (key: the first `home_prefix_blocks` blocks), so gateways that share no
//!    state place the same new prefix on the same replica.
//! 2. **lowest_cost** / **cache_hit**: the lowest ttft wins (near-ties within
//!    `tie_tolerance_ms` go to the best rendezvous rank of the request's first unmatched
//!    blocks, for the same cross-gateway agreement).
//! 3. **spread_hot_prefix**: if that winner is a holder whose queue wait exceeds the least
//!    queued other replica's by more than `spread_queue_gap_ms`, send the request to a second
//!    holder (or, if none, to the prefix's next home in rendezvous order) so it warms up,
//!    unless that would cost more than `spread_max_slowdown` x the winner's ttft.
//!
//! [`ReplicaSnapshot::unreported_requests`]: crate::cluster::ReplicaSnapshot::unreported_requests

use super::common::{bounded_home, decide, mix64, prefix_key, rendezvous_score, Eligible};
use super::{check_range, Policy, RouteRequest};
use crate::cluster::{ClusterView, ReplicaSnapshot};
use crate::decision::{Branch, CandidateScore, Decision, Terms};
use crate::error::RouteError;
use crate::index::PrefixIndex;
use serde::{Deserialize, Serialize};

/// Weight of the newest sample in the average uncached tokens per request.
const EWMA_ALPHA: f64 = 0.1;

/// Parameters of `warm`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct WarmConfig {
    /// Prefill rate assumed for replicas that report none (tokens/s).
    pub default_prefill_tokens_per_s: f64,
    /// KV usage above which the pressure barrier applies.
    pub kv_pressure_threshold: f64,
    /// Scale of the KV pressure barrier in ms (SMG least_load uses 150 ms).
    pub kv_pressure_weight_ms: f64,
    /// Queue-wait excess (ms) over the least queued alternative that marks a holder overloaded.
    pub spread_queue_gap_ms: f64,
    /// Spread only if the second holder's ttft is at most this multiple of the best ttft.
    pub spread_max_slowdown: f64,
    /// Blocks that key a prefix's home replica.
    pub home_prefix_blocks: u32,
    /// Bounded-load slack for homes: skip replicas above (1 + eps) x the average load.
    pub home_load_eps: f64,
    /// Candidates within this many ms of the best ttft count as tied.
    pub tie_tolerance_ms: f64,
    /// Initial estimate of uncached tokens per in-flight request.
    pub initial_request_tokens: f64,
}

impl Default for WarmConfig {
    fn default() -> Self {
        Self {
            default_prefill_tokens_per_s: 4000.0,
            kv_pressure_threshold: 0.9,
            kv_pressure_weight_ms: 150.0,
            spread_queue_gap_ms: 500.0,
            spread_max_slowdown: 2.0,
            home_prefix_blocks: 4,
            home_load_eps: 0.25,
            tie_tolerance_ms: 2.0,
            initial_request_tokens: 512.0,
        }
    }
}

impl WarmConfig {
    /// Checks the ranges.
    pub fn validate(&self) -> Result<(), RouteError> {
        check_range(
            "warm.default_prefill_tokens_per_s",
            self.default_prefill_tokens_per_s,
            1.0,
            1e9,
        )?;
        check_range(
            "warm.kv_pressure_threshold",
            self.kv_pressure_threshold,
            0.0,
            1.0,
        )?;
        check_range(
            "warm.kv_pressure_weight_ms",
            self.kv_pressure_weight_ms,
            0.0,
            1e9,
        )?;
        check_range(
            "warm.spread_queue_gap_ms",
            self.spread_queue_gap_ms,
            0.0,
            1e9,
        )?;
        check_range(
            "warm.spread_max_slowdown",
            self.spread_max_slowdown,
            1.0,
            1e6,
        )?;
        check_range("warm.home_load_eps", self.home_load_eps, 0.0, 100.0)?;
        check_range("warm.tie_tolerance_ms", self.tie_tolerance_ms, 0.0, 1e9)?;
        check_range(
            "warm.initial_request_tokens",
            self.initial_request_tokens,
            0.0,
            1e9,
        )?;
        if self.home_prefix_blocks == 0 {
            return Err(RouteError::invalid(
                "warm.home_prefix_blocks",
                "must be at least 1",
            ));
        }
        Ok(())
    }
}

/// The predicted-TTFT policy.
#[derive(Debug)]
pub struct Warm {
    cfg: WarmConfig,
    avg_request_tokens: f64,
}

/// The ttft model's parts for one replica.
#[derive(Clone, Copy, Debug)]
struct Cost {
    queue_ms: f64,
    prefill_ms: f64,
    kv_ms: f64,
    uncached: u32,
}

impl Cost {
    fn ttft(&self) -> f64 {
        self.queue_ms + self.prefill_ms + self.kv_ms
    }
}

impl Warm {
    /// A policy with no history.
    pub fn new(cfg: WarmConfig) -> Self {
        let avg_request_tokens = cfg.initial_request_tokens;
        Self {
            cfg,
            avg_request_tokens,
        }
    }

    /// The current estimate of uncached tokens per request.
    pub fn avg_request_tokens(&self) -> f64 {
        self.avg_request_tokens
    }

    fn cost(&self, req: &RouteRequest<'_>, r: &ReplicaSnapshot, matched: u32) -> Cost {
        let rate = if r.prefill_tokens_per_s.is_finite() && r.prefill_tokens_per_s > 0.0 {
            r.prefill_tokens_per_s
        } else {
            self.cfg.default_prefill_tokens_per_s
        };
        let bs = u64::from(req.block_size.0.max(1));
        let cached = (u64::from(matched) * bs).min(u64::from(req.prompt_tokens));
        let uncached = u64::from(req.prompt_tokens) - cached;
        let queued = r.queued_prefill_tokens as f64
            + f64::from(r.unreported_requests()) * self.avg_request_tokens;
        let kv_ms = if r.kv_capacity_blocks == 0 {
            0.0
        } else {
            let k = (r.kv_used_blocks + uncached.div_ceil(bs)) as f64 / r.kv_capacity_blocks as f64;
            let thr = self.cfg.kv_pressure_threshold;
            if k <= thr {
                0.0
            } else {
                self.cfg.kv_pressure_weight_ms * (k - thr) / (1.0 - k).max(0.01)
            }
        };
        Cost {
            queue_ms: queued / rate * 1000.0,
            prefill_ms: uncached as f64 / rate * 1000.0,
            kv_ms,
            uncached: u32::try_from(uncached).unwrap_or(u32::MAX),
        }
    }
}

impl Policy for Warm {
    fn name(&self) -> &'static str {
        "warm"
    }

    fn select(
        &mut self,
        req: &RouteRequest<'_>,
        view: &ClusterView,
        index: &PrefixIndex,
    ) -> Result<Decision, RouteError> {
        let el = Eligible::gather(req, view, index)?;
        let n = el.replicas.len();
        let mut costs = Vec::with_capacity(n);
        let candidates: Vec<CandidateScore> = el
            .replicas
            .iter()
            .map(|r| {
                let matched = el.matches.get(r.id).blocks().min(req.hashes.len() as u32);
                let c = self.cost(req, r, matched);
                costs.push(c);
                let terms = Terms::new()
                    .with("queue_ms", c.queue_ms)
                    .with("prefill_ms", c.prefill_ms)
                    .with("kv_pressure_ms", c.kv_ms)
                    .with("uncached_tokens", f64::from(c.uncached));
                el.score(req, r, c.ttft(), terms)
            })
            .collect();
        let home_key = prefix_key(req.hashes, self.cfg.home_prefix_blocks);
        let is_holder = |i: usize| candidates[i].matched_blocks > 0;
        let (branch, chosen) = if req.hashes.is_empty() || !(0..n).any(is_holder) {
            if req.hashes.is_empty() {
                (Branch::LeastLoaded, self.best_by_ttft(req, &candidates, 0))
            } else {
                let home = bounded_home(home_key, &el.replicas, self.cfg.home_load_eps, |_| true);
                (Branch::ColdHome, home.map_or(0, |h| h.0))
            }
        } else {
            let deepest = candidates
                .iter()
                .map(|c| c.matched_blocks)
                .max()
                .unwrap_or(0);
            let best = self.best_by_ttft(req, &candidates, deepest);
            if !is_holder(best) {
                (Branch::LowestCost, best)
            } else if let Some(second) =
                self.spread_target(&el, &candidates, &costs, best, home_key)
            {
                (Branch::SpreadHotPrefix, second)
            } else {
                (Branch::CacheHit, best)
            }
        };
        let sample = f64::from(costs[chosen].uncached);
        self.avg_request_tokens += EWMA_ALPHA * (sample - self.avg_request_tokens);
        Ok(decide(self.name(), branch, chosen, candidates))
    }
}

impl Warm {
    /// Lowest ttft; candidates within the tie tolerance are ranked by rendezvous score of the
    /// request's chain just past the deepest match, so independent gateways agree.
    fn best_by_ttft(
        &self,
        req: &RouteRequest<'_>,
        candidates: &[CandidateScore],
        deepest: u32,
    ) -> usize {
        let min = candidates
            .iter()
            .map(|c| c.cost_ms)
            .fold(f64::INFINITY, f64::min);
        let key = prefix_key(
            req.hashes,
            deepest.saturating_add(self.cfg.home_prefix_blocks),
        );
        let key = mix64(key ^ u64::from(deepest));
        (0..candidates.len())
            .filter(|&i| candidates[i].cost_ms <= min + self.cfg.tie_tolerance_ms)
            .max_by_key(|&i| {
                (
                    candidates[i].matched_blocks,
                    rendezvous_score(key, candidates[i].replica),
                )
            })
            .unwrap_or(0)
    }

    /// The replica to warm when `best` (a holder) is overloaded, if spreading is worth it.
    fn spread_target(
        &self,
        el: &Eligible<'_>,
        candidates: &[CandidateScore],
        costs: &[Cost],
        best: usize,
        home_key: u64,
    ) -> Option<usize> {
        let n = candidates.len();
        let least_queue = (0..n)
            .filter(|&i| i != best)
            .map(|i| costs[i].queue_ms)
            .fold(f64::INFINITY, f64::min);
        let threshold = least_queue + self.cfg.spread_queue_gap_ms;
        if costs[best].queue_ms.partial_cmp(&threshold) != Some(std::cmp::Ordering::Greater) {
            return None;
        }
        let relieved =
            |i: usize| costs[i].queue_ms + self.cfg.spread_queue_gap_ms < costs[best].queue_ms;
        // A second holder that is clearly less queued, cheapest first.
        let second_holder = (0..n)
            .filter(|&i| i != best && candidates[i].matched_blocks > 0 && relieved(i))
            .min_by(|&a, &b| candidates[a].cost_ms.total_cmp(&candidates[b].cost_ms));
        let target = second_holder.or_else(|| {
            // Otherwise the prefix's next home among non-holders: the same one on every gateway.
            bounded_home(home_key, &el.replicas, self.cfg.home_load_eps, |i| {
                candidates[i].matched_blocks == 0 && relieved(i)
            })
            .map(|h| h.0)
        })?;
        (candidates[target].cost_ms <= self.cfg.spread_max_slowdown * candidates[best].cost_ms)
            .then_some(target)
    }
}

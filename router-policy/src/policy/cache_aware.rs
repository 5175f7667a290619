//! `cache_aware`: the SGLang router / SMG semantics, kept as the baseline to beat.
//!
//! 1. Imbalance check on outstanding requests: if `max - min > balance_abs_threshold` and
//!    `max > balance_rel_threshold * min`, take the least loaded replica.
//! 2. Otherwise find the replica with the longest prefix match (ties: lower load, then id).
//!    If `matched_tokens / prompt_tokens > cache_threshold`, take it; else take the least
//!    loaded replica. Least-loaded ties go to the lowest id, as in SMG (sglang #32983).
//!
//! Defaults are SMG's CLI defaults (`cache_threshold` 0.3, `balance_abs_threshold` 64,
//! `balance_rel_threshold` 1.5). The caller records the chosen replica in the index's
//! approximate part, as SMG inserts the request into its tree.

use super::common::{decide, least_loaded, Eligible};
use super::request::{check_range, Policy, RouteRequest};
use crate::cluster::ClusterView;
use crate::decision::{Branch, Decision, Terms};
use crate::error::RouteError;
use crate::index::PrefixIndex;
use serde::{Deserialize, Serialize};

/// Parameters of `cache_aware` (SMG names).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct CacheAwareConfig {
    /// Minimum matched fraction of the prompt for cache affinity to win.
    pub cache_threshold: f64,
    /// Absolute load spread that counts as imbalance (requests).
    pub balance_abs_threshold: u32,
    /// Relative load spread (max / min) that counts as imbalance.
    pub balance_rel_threshold: f64,
}

impl Default for CacheAwareConfig {
    fn default() -> Self {
        Self {
            cache_threshold: 0.3,
            balance_abs_threshold: 64,
            balance_rel_threshold: 1.5,
        }
    }
}

impl CacheAwareConfig {
    /// Checks the ranges.
    pub fn validate(&self) -> Result<(), RouteError> {
        check_range(
            "cache_aware.cache_threshold",
            self.cache_threshold,
            0.0,
            1.0,
        )?;
        check_range(
            "cache_aware.balance_rel_threshold",
            self.balance_rel_threshold,
            1.0,
            1e6,
        )
    }
}

/// SGLang/SMG cache-aware routing.
#[derive(Debug)]
pub struct CacheAware {
    cfg: CacheAwareConfig,
}

impl CacheAware {
    /// A stateless policy (the prefix state lives in the [`PrefixIndex`]).
    pub fn new(cfg: CacheAwareConfig) -> Self {
        Self { cfg }
    }
}

impl Policy for CacheAware {
    fn name(&self) -> &'static str {
        "cache_aware"
    }

    fn select(
        &mut self,
        req: &RouteRequest<'_>,
        view: &ClusterView,
        index: &PrefixIndex,
    ) -> Result<Decision, RouteError> {
        let el = Eligible::gather(req, view, index)?;
        let bs = req.block_size.0.max(1);
        let prompt = req.prompt_tokens.max(1) as f64;
        let candidates: Vec<_> = el
            .replicas
            .iter()
            .map(|r| {
                let m = el.matches.get(r.id).blocks().min(req.hashes.len() as u32);
                let rate = (f64::from(m) * f64::from(bs) / prompt).min(1.0);
                let terms = Terms::new()
                    .with("load", f64::from(r.load()))
                    .with("match_rate", rate);
                // Score: lower is better; match rate dominates, load breaks ties.
                el.score(req, r, f64::from(r.load()) - rate * 1e6, terms)
            })
            .collect();
        let loads: Vec<u32> = el.replicas.iter().map(|r| r.load()).collect();
        let (min, max) = (
            loads.iter().copied().min().unwrap_or(0),
            loads.iter().copied().max().unwrap_or(0),
        );
        let imbalanced = max - min > self.cfg.balance_abs_threshold
            && f64::from(max) > self.cfg.balance_rel_threshold * f64::from(min);
        let min_idx = least_loaded(&el.replicas);
        if imbalanced {
            return Ok(decide(self.name(), Branch::Imbalanced, min_idx, candidates));
        }
        let best = (0..candidates.len())
            .max_by(|&a, &b| {
                let (ca, cb) = (&candidates[a], &candidates[b]);
                ca.matched_blocks
                    .cmp(&cb.matched_blocks)
                    .then(loads[b].cmp(&loads[a]))
                    .then(el.replicas[b].id.cmp(&el.replicas[a].id))
            })
            .unwrap_or(min_idx);
        let rate = candidates[best].terms.get("match_rate").unwrap_or(0.0);
        if candidates[best].matched_blocks > 0 && rate > self.cfg.cache_threshold {
            Ok(decide(self.name(), Branch::CacheHit, best, candidates))
        } else {
            Ok(decide(
                self.name(),
                Branch::LeastLoaded,
                min_idx,
                candidates,
            ))
        }
    }
}

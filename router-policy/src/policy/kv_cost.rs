//! `kv_cost`: NVIDIA Dynamo's default ("linear") KV router cost, in blocks.
//!
//! ```text
//! prompt_blocks   = ceil(prompt_tokens / B)
//! prefill_blocks  = max(queued_prefill_tokens / B + prompt_blocks - overlap_credit * matched, 0)
//! decode_blocks   = kv_used_blocks + prompt_blocks
//! cost            = prefill_load_scale * prefill_blocks + decode_blocks
//! ```
//! Lowest cost wins (ties: lower load, then id). Dynamo's softmax temperature is not
//! modelled (temperature 0, its default).

use super::common::{decide, Eligible};
use super::request::{check_range, Policy, RouteRequest};
use crate::cluster::ClusterView;
use crate::decision::{Branch, Decision, Terms};
use crate::error::RouteError;
use crate::index::PrefixIndex;
use serde::{Deserialize, Serialize};

/// Parameters of `kv_cost` (Dynamo names).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct KvCostConfig {
    /// Weight of prefill blocks against decode blocks.
    pub prefill_load_scale: f64,
    /// Credit per matched block (1 = a matched block costs nothing to prefill).
    pub overlap_credit: f64,
}

impl Default for KvCostConfig {
    fn default() -> Self {
        Self {
            prefill_load_scale: 1.0,
            overlap_credit: 1.0,
        }
    }
}

impl KvCostConfig {
    /// Checks the ranges.
    pub fn validate(&self) -> Result<(), RouteError> {
        check_range(
            "kv_cost.prefill_load_scale",
            self.prefill_load_scale,
            0.0,
            1e6,
        )?;
        check_range("kv_cost.overlap_credit", self.overlap_credit, 0.0, 1e6)
    }
}

/// Dynamo-style linear cost routing.
#[derive(Debug)]
pub struct KvCost {
    cfg: KvCostConfig,
}

impl KvCost {
    /// A stateless policy.
    pub fn new(cfg: KvCostConfig) -> Self {
        Self { cfg }
    }
}

impl Policy for KvCost {
    fn name(&self) -> &'static str {
        "kv_cost"
    }

    fn select(
        &mut self,
        req: &RouteRequest<'_>,
        view: &ClusterView,
        index: &PrefixIndex,
    ) -> Result<Decision, RouteError> {
        let el = Eligible::gather(req, view, index)?;
        let bs = f64::from(req.block_size.0.max(1));
        let prompt_blocks = (f64::from(req.prompt_tokens) / bs).ceil();
        let candidates: Vec<_> = el
            .replicas
            .iter()
            .map(|r| {
                let matched = f64::from(el.matches.get(r.id).blocks().min(req.hashes.len() as u32));
                let active_prefill = r.queued_prefill_tokens as f64 / bs;
                let prefill =
                    (active_prefill + prompt_blocks - self.cfg.overlap_credit * matched).max(0.0);
                let decode = r.kv_used_blocks as f64 + prompt_blocks;
                let cost = self.cfg.prefill_load_scale * prefill + decode;
                let terms = Terms::new()
                    .with("prefill_blocks", prefill)
                    .with("decode_blocks", decode);
                el.score(req, r, cost, terms)
            })
            .collect();
        let chosen = (0..candidates.len())
            .min_by(|&a, &b| {
                candidates[a]
                    .cost_ms
                    .total_cmp(&candidates[b].cost_ms)
                    .then(el.replicas[a].load().cmp(&el.replicas[b].load()))
                    .then(el.replicas[a].id.cmp(&el.replicas[b].id))
            })
            .unwrap_or(0);
        let branch = if candidates[chosen].matched_blocks > 0 {
            Branch::CacheHit
        } else {
            Branch::LowestCost
        };
        Ok(decide(self.name(), branch, chosen, candidates))
    }
}

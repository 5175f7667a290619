//! `consistent_hash`: bounded-load rendezvous hashing keyed by the first blocks.
//!
//! The key is the chained hash of block `min(prefix_blocks, len) - 1`, so requests sharing
//! their first `prefix_blocks` blocks share a key. Replicas are ranked by rendezvous score
//! (highest random weight); the first whose outstanding requests stay below
//! `ceil((1 + load_eps) * (total + 1) / n)` takes the request (Mirrokni et al., "consistent
//! hashing with bounded loads"), so no replica exceeds (1 + eps) x the average.

use super::common::{bounded_home, decide, load_terms, prefix_key, rendezvous_order, Eligible};
use super::request::{check_range, Policy, RouteRequest};
use crate::cluster::ClusterView;
use crate::decision::{Branch, Decision};
use crate::error::RouteError;
use crate::index::PrefixIndex;
use serde::{Deserialize, Serialize};

/// Parameters of `consistent_hash`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ConsistentHashConfig {
    /// Blocks that form the key (16 blocks of 16 = SMG's 256 tokens).
    pub prefix_blocks: u32,
    /// Load slack eps: a replica may hold at most (1 + eps) x the average.
    pub load_eps: f64,
}

impl Default for ConsistentHashConfig {
    fn default() -> Self {
        Self {
            prefix_blocks: 16,
            load_eps: 0.25,
        }
    }
}

impl ConsistentHashConfig {
    /// Checks the ranges.
    pub fn validate(&self) -> Result<(), RouteError> {
        if self.prefix_blocks == 0 {
            return Err(RouteError::invalid(
                "consistent_hash.prefix_blocks",
                "must be at least 1",
            ));
        }
        check_range("consistent_hash.load_eps", self.load_eps, 0.0, 100.0)
    }
}

/// Bounded-load rendezvous hashing.
#[derive(Debug)]
pub struct ConsistentHash {
    cfg: ConsistentHashConfig,
}

impl ConsistentHash {
    /// A stateless policy.
    pub fn new(cfg: ConsistentHashConfig) -> Self {
        Self { cfg }
    }
}

impl Policy for ConsistentHash {
    fn name(&self) -> &'static str {
        "consistent_hash"
    }

    fn select(
        &mut self,
        req: &RouteRequest<'_>,
        view: &ClusterView,
        index: &PrefixIndex,
    ) -> Result<Decision, RouteError> {
        let el = Eligible::gather(req, view, index)?;
        let key = prefix_key(req.hashes, self.cfg.prefix_blocks);
        let (chosen, first) =
            bounded_home(key, &el.replicas, self.cfg.load_eps, |_| true).unwrap_or((0, false));
        let mut rank = vec![0usize; el.replicas.len()];
        for (pos, i) in rendezvous_order(key, &el.replicas).into_iter().enumerate() {
            rank[i] = pos;
        }
        let candidates = el
            .replicas
            .iter()
            .enumerate()
            .map(|(i, r)| el.score(req, r, rank[i] as f64, load_terms(r)))
            .collect();
        let branch = if first {
            Branch::ConsistentHash
        } else {
            Branch::ConsistentHashOverflow
        };
        Ok(decide(self.name(), branch, chosen, candidates))
    }
}

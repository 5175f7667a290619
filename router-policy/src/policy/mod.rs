//! Routing policies behind one small trait, one file each, chosen by a serde-tagged config.
//!
//! | name | rule |
//! |---|---|
//! | `round_robin` | next eligible replica in id order |
//! | `random` | uniform over eligible replicas (seeded) |
//! | `least_loaded` | power-of-d choices on outstanding requests |
//! | `consistent_hash` | bounded-load rendezvous hash of the first blocks |
//! | `cache_aware` | SGLang/SMG: imbalance check, then longest match above a threshold |
//! | `kv_cost` | Dynamo linear cost in blocks |
//! | `warm` (default) | predicted TTFT (queued prefill tokens) + recompute charge; holders win near-ties |
//!
//! Every policy considers only healthy replicas serving the request's checkpoint and fails
//! with [`RouteError::NoEligibleReplica`] when there is none.

mod cache_aware;
mod common;
mod consistent_hash;
mod kv_cost;
mod least_loaded;
mod random;
mod round_robin;
mod warm;

#[cfg(test)]
mod tests;

pub use cache_aware::{CacheAware, CacheAwareConfig};
pub use common::{rendezvous_score, MAX_FALLBACKS};
pub use consistent_hash::{ConsistentHash, ConsistentHashConfig};
pub use kv_cost::{KvCost, KvCostConfig};
pub use least_loaded::{LeastLoaded, LeastLoadedConfig};
pub use random::RandomPolicy;
pub use round_robin::RoundRobin;
pub use warm::{Warm, WarmConfig};

use crate::cluster::ClusterView;
use crate::decision::Decision;
use crate::error::RouteError;
use crate::index::PrefixIndex;
use crate::region::Regions;
use serde::{Deserialize, Serialize};
use warmpath_core::ids::{BlockHash, BlockSize, CheckpointId, Millis, RegionId};

/// One request as a policy sees it.
#[derive(Clone, Copy, Debug)]
pub struct RouteRequest<'a> {
    /// Checkpoint the request needs; only replicas serving exactly this one are eligible.
    pub checkpoint: &'a CheckpointId,
    /// Chained block hashes of the prompt (full blocks only).
    pub hashes: &'a [BlockHash],
    /// Prompt length in tokens (including the trailing partial block).
    pub prompt_tokens: u32,
    /// Tokens per block the hashes were computed with.
    pub block_size: BlockSize,
    /// Caller's clock, for the approximate index's TTL.
    pub now: Millis,
    /// The deciding gateway's region and RTTs; `None` ignores regions.
    pub regions: Option<&'a Regions>,
    /// Regions the tenant's data may be processed in (empty = any): a hard filter.
    pub residency: &'a [RegionId],
}

/// A routing policy. Implementations keep only small local state (counters, RNG, averages).
pub trait Policy: Send {
    /// The policy's config name, e.g. `"warm"`.
    fn name(&self) -> &'static str;

    /// Chooses a replica for `req`.
    fn select(
        &mut self,
        req: &RouteRequest<'_>,
        view: &ClusterView,
        index: &PrefixIndex,
    ) -> Result<Decision, RouteError>;
}

/// Every policy name accepted by [`PolicyConfig::from_name`], default first.
pub const POLICY_NAMES: &[&str] = &[
    "warm",
    "round_robin",
    "random",
    "least_loaded",
    "consistent_hash",
    "cache_aware",
    "kv_cost",
];

/// Which policy to run, with its parameters. JSON/TOML: `{"type": "warm", ...}`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case", deny_unknown_fields)]
pub enum PolicyConfig {
    /// Next eligible replica in id order.
    RoundRobin,
    /// Uniform random choice.
    Random {
        /// RNG seed (deterministic runs).
        #[serde(default)]
        seed: u64,
    },
    /// Power-of-d choices on load.
    LeastLoaded(LeastLoadedConfig),
    /// Bounded-load rendezvous hashing of the first blocks.
    ConsistentHash(ConsistentHashConfig),
    /// SGLang/SMG cache-aware baseline.
    CacheAware(CacheAwareConfig),
    /// Dynamo-style linear KV cost.
    KvCost(KvCostConfig),
    /// Predicted-TTFT routing (ours).
    Warm(WarmConfig),
}

impl Default for PolicyConfig {
    fn default() -> Self {
        PolicyConfig::Warm(WarmConfig::default())
    }
}

impl PolicyConfig {
    /// The policy's name (one of [`POLICY_NAMES`]).
    pub fn name(&self) -> &'static str {
        match self {
            PolicyConfig::RoundRobin => "round_robin",
            PolicyConfig::Random { .. } => "random",
            PolicyConfig::LeastLoaded(_) => "least_loaded",
            PolicyConfig::ConsistentHash(_) => "consistent_hash",
            PolicyConfig::CacheAware(_) => "cache_aware",
            PolicyConfig::KvCost(_) => "kv_cost",
            PolicyConfig::Warm(_) => "warm",
        }
    }

    /// The named policy with default parameters.
    pub fn from_name(name: &str) -> Result<Self, RouteError> {
        Ok(match name {
            "warm" => PolicyConfig::Warm(WarmConfig::default()),
            "round_robin" => PolicyConfig::RoundRobin,
            "random" => PolicyConfig::Random { seed: 0 },
            "least_loaded" => PolicyConfig::LeastLoaded(LeastLoadedConfig::default()),
            "consistent_hash" => PolicyConfig::ConsistentHash(ConsistentHashConfig::default()),
            "cache_aware" => PolicyConfig::CacheAware(CacheAwareConfig::default()),
            "kv_cost" => PolicyConfig::KvCost(KvCostConfig::default()),
            other => return Err(RouteError::UnknownPolicy(other.to_owned())),
        })
    }

    /// Checks every parameter's range.
    pub fn validate(&self) -> Result<(), RouteError> {
        match self {
            PolicyConfig::RoundRobin | PolicyConfig::Random { .. } => Ok(()),
            PolicyConfig::LeastLoaded(c) => c.validate(),
            PolicyConfig::ConsistentHash(c) => c.validate(),
            PolicyConfig::CacheAware(c) => c.validate(),
            PolicyConfig::KvCost(c) => c.validate(),
            PolicyConfig::Warm(c) => c.validate(),
        }
    }

    /// A fresh policy instance (call [`PolicyConfig::validate`] first).
    pub fn build(&self) -> Box<dyn Policy> {
        match self {
            PolicyConfig::RoundRobin => Box::new(RoundRobin::new()),
            PolicyConfig::Random { seed } => Box::new(RandomPolicy::new(*seed)),
            PolicyConfig::LeastLoaded(c) => Box::new(LeastLoaded::new(c.clone())),
            PolicyConfig::ConsistentHash(c) => Box::new(ConsistentHash::new(c.clone())),
            PolicyConfig::CacheAware(c) => Box::new(CacheAware::new(c.clone())),
            PolicyConfig::KvCost(c) => Box::new(KvCost::new(c.clone())),
            PolicyConfig::Warm(c) => Box::new(Warm::new(c.clone())),
        }
    }
}

/// Checks that a float parameter is finite and within `[lo, hi]`.
pub(crate) fn check_range(key: &'static str, v: f64, lo: f64, hi: f64) -> Result<(), RouteError> {
    if v.is_finite() && v >= lo && v <= hi {
        Ok(())
    } else {
        Err(RouteError::invalid(
            key,
            format!("{v} is outside [{lo}, {hi}]"),
        ))
    }
}

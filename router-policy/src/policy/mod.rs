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
pub(crate) mod names;
mod random;
pub(crate) mod request;
mod round_robin;
mod warm;

#[cfg(test)]
mod tests;

pub use cache_aware::{CacheAware, CacheAwareConfig};
pub use common::{rendezvous_score, MAX_FALLBACKS};
pub use consistent_hash::{ConsistentHash, ConsistentHashConfig};
pub use kv_cost::{KvCost, KvCostConfig};
pub use least_loaded::{LeastLoaded, LeastLoadedConfig};
pub use names::POLICY_NAMES;
pub use random::RandomPolicy;
pub use request::{Policy, RouteRequest};
pub use round_robin::RoundRobin;
pub use warm::{Warm, WarmConfig};

use crate::error::RouteError;
use serde::{Deserialize, Serialize};

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

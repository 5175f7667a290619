//! `least_loaded`: power-of-d choices. Sample `choices` distinct eligible replicas and take
//! the one with the fewest outstanding requests ([`ReplicaSnapshot::load`]). With d = 2 the
//! maximum load is exponentially better than random (Mitzenmacher), at O(d) cost; with d
//! at least the replica count it is an exact least-loaded scan with random tie-breaking.
//!
//! [`ReplicaSnapshot::load`]: crate::cluster::ReplicaSnapshot::load

use super::common::{decide, load_terms, Eligible};
use super::request::{Policy, RouteRequest};
use crate::cluster::ClusterView;
use crate::decision::{Branch, Decision};
use crate::error::RouteError;
use crate::index::PrefixIndex;
use serde::{Deserialize, Serialize};
use warmpath_core::rng::{Draw, SeedableRng, SplitMix64};

/// Parameters of `least_loaded`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct LeastLoadedConfig {
    /// How many replicas to sample (d); at least 1.
    pub choices: u32,
    /// RNG seed.
    pub seed: u64,
}

impl Default for LeastLoadedConfig {
    fn default() -> Self {
        Self {
            choices: 2,
            seed: 0,
        }
    }
}

impl LeastLoadedConfig {
    /// Checks `choices >= 1`.
    pub fn validate(&self) -> Result<(), RouteError> {
        if self.choices == 0 {
            return Err(RouteError::invalid(
                "least_loaded.choices",
                "must be at least 1",
            ));
        }
        Ok(())
    }
}

/// Power-of-d choices.
#[derive(Debug)]
pub struct LeastLoaded {
    cfg: LeastLoadedConfig,
    rng: SplitMix64,
    scratch: Vec<usize>,
}

impl LeastLoaded {
    /// A policy with its own seeded RNG.
    pub fn new(cfg: LeastLoadedConfig) -> Self {
        let rng = SplitMix64::seed_from_u64(cfg.seed);
        Self {
            cfg,
            rng,
            scratch: Vec::new(),
        }
    }
}

impl Policy for LeastLoaded {
    fn name(&self) -> &'static str {
        "least_loaded"
    }

    fn select(
        &mut self,
        req: &RouteRequest<'_>,
        view: &ClusterView,
        index: &PrefixIndex,
    ) -> Result<Decision, RouteError> {
        let el = Eligible::gather(req, view, index)?;
        let n = el.replicas.len();
        let d = (self.cfg.choices.max(1) as usize).min(n);
        // Partial Fisher-Yates: the first d entries are a uniform sample without replacement.
        self.scratch.clear();
        self.scratch.extend(0..n);
        for i in 0..d {
            let j = i + self.rng.below((n - i) as u64) as usize;
            self.scratch.swap(i, j);
        }
        let chosen = self.scratch[..d]
            .iter()
            .copied()
            .min_by_key(|&i| el.replicas[i].load())
            .unwrap_or(0);
        let candidates = el
            .replicas
            .iter()
            .map(|r| el.score(req, r, f64::from(r.load()), load_terms(r)))
            .collect();
        Ok(decide(self.name(), Branch::LeastLoaded, chosen, candidates))
    }
}

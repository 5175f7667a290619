//! `random`: a uniform choice among eligible replicas, from a seeded RNG.

use super::common::{decide, load_terms, Eligible};
use super::request::{Policy, RouteRequest};
use crate::cluster::ClusterView;
use crate::decision::{Branch, Decision};
use crate::error::RouteError;
use crate::index::PrefixIndex;
use warmpath_core::rng::{Draw, SeedableRng, SplitMix64};

/// Uniform random routing.
#[derive(Debug)]
pub struct RandomPolicy {
    rng: SplitMix64,
}

impl RandomPolicy {
    /// A policy whose choices are a deterministic function of `seed` and the call sequence.
    pub fn new(seed: u64) -> Self {
        Self {
            rng: SplitMix64::seed_from_u64(seed),
        }
    }
}

impl Policy for RandomPolicy {
    fn name(&self) -> &'static str {
        "random"
    }

    fn select(
        &mut self,
        req: &RouteRequest<'_>,
        view: &ClusterView,
        index: &PrefixIndex,
    ) -> Result<Decision, RouteError> {
        let el = Eligible::gather(req, view, index)?;
        let chosen = self.rng.below(el.replicas.len() as u64) as usize;
        let candidates = el
            .replicas
            .iter()
            .map(|r| el.score(req, r, f64::from(r.load()), load_terms(r)))
            .collect();
        Ok(decide(self.name(), Branch::Random, chosen, candidates))
    }
}

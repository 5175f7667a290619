//! `round_robin`: the next eligible replica in id order. A baseline that ignores cache and load.

use super::common::{decide, load_terms, Eligible};
use super::request::{Policy, RouteRequest};
use crate::cluster::ClusterView;
use crate::decision::{Branch, Decision};
use crate::error::RouteError;
use crate::index::PrefixIndex;

/// Round robin over the eligible replicas.
#[derive(Debug, Default)]
pub struct RoundRobin {
    next: u64,
}

impl RoundRobin {
    /// Starts at the first eligible replica.
    pub fn new() -> Self {
        Self::default()
    }
}

impl Policy for RoundRobin {
    fn name(&self) -> &'static str {
        "round_robin"
    }

    fn select(
        &mut self,
        req: &RouteRequest<'_>,
        view: &ClusterView,
        index: &PrefixIndex,
    ) -> Result<Decision, RouteError> {
        let el = Eligible::gather(req, view, index)?;
        let n = el.replicas.len();
        let chosen = (self.next % n as u64) as usize;
        self.next = self.next.wrapping_add(1);
        let candidates = el
            .replicas
            .iter()
            .enumerate()
            // Cost = how many turns until this replica's slot comes round again.
            .map(|(i, r)| el.score(req, r, ((i + n - chosen) % n) as f64, load_terms(r)))
            .collect();
        Ok(decide(self.name(), Branch::RoundRobin, chosen, candidates))
    }
}

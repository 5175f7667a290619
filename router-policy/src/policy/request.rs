//! What every policy file needs from its parent: the request as a policy sees it, the
//! [`Policy`] trait, and the range check of float parameters.

use crate::cluster::ClusterView;
use crate::decision::Decision;
use crate::error::RouteError;
use crate::index::PrefixIndex;
use crate::region::Regions;
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

    /// Takes back what [`Policy::select`] counted for a decision whose request was not
    /// sent after all (shed at admission, refused by its queue): `decision.charged_ms` of
    /// work on `decision.replica`, as of `now`. Policies that count nothing keep the
    /// default, which does nothing.
    fn withdraw(&mut self, decision: &Decision, now: Millis) {
        let _ = (decision, now);
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

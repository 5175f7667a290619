//! What a policy returns: the choice, retry fallbacks, and why.
//!
//!
//! How each candidate scored ([`Branch`], [`Terms`], [`CandidateScore`]) and the notes other
//! modules fill in ([`RegionNote`] in [`crate::region`], [`PrefillNote`] in
//! [`crate::disagg`]) live in child modules, so a decision depends on nothing above it.

mod notes;
mod score;

pub use notes::{PrefillNote, RegionNote, SpillReason};
pub use score::{Branch, CandidateScore, Terms, MAX_TERMS};

use serde::Serialize;
use warmpath_core::ids::ReplicaId;

/// Why the choice was made: for metrics, dashboards and debugging.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Explanation {
    /// Name of the policy that decided.
    pub policy: &'static str,
    /// The rule that decided.
    pub branch: Branch,
    /// Every eligible replica's score, in replica id order.
    pub candidates: Vec<CandidateScore>,
    /// The regional comparison, when the policy weighed other regions (`warm` in `spill`
    /// mode with replicas in more than one region).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub region: Option<RegionNote>,
    /// The prefill replica, when a role-split pool splits the request
    /// ([`crate::disagg::select`]); the decision itself is the decode replica.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub prefill: Option<PrefillNote>,
}

impl Explanation {
    /// The score of `replica`, if it was a candidate.
    pub fn candidate(&self, replica: ReplicaId) -> Option<&CandidateScore> {
        self.candidates.iter().find(|c| c.replica == replica)
    }
}

/// A routing decision.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Decision {
    /// Where to send the request.
    pub replica: ReplicaId,
    /// Where to retry, in order (next-best cache holder first); never contains `replica`.
    pub fallbacks: Vec<ReplicaId>,
    /// Prefix blocks the chosen replica is predicted to have cached.
    pub predicted_cached_blocks: u32,
    /// Why.
    pub explanation: Explanation,
    /// Prefill work (ms) the policy counted against `replica` for this request (`warm`
    /// keeps a backlog per replica; 0 for the others): what [`crate::Policy::withdraw`]
    /// takes back when the request is not sent after all.
    #[serde(skip)]
    pub charged_ms: f64,
}

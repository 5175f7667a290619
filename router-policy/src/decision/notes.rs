//! The parts of an explanation that other modules fill in: the regional comparison
//! ([`crate::region`]) and the prefill side of a split request ([`crate::disagg`]).
//! Defined here so that a decision depends on nothing above it.

use super::score::{Branch, CandidateScore};
use serde::Serialize;
use warmpath_core::ids::{RegionId, ReplicaId};

/// Why a request left its home region.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum SpillReason {
    /// The remote replica holds a longer prefix of the prompt than any local one.
    WarmerPrefix,
    /// Local replicas are queued deep enough that a remote one answers sooner.
    Overloaded,
    /// No local replica is eligible at all.
    NoLocalReplica,
}

impl SpillReason {
    /// Stable label for metrics.
    pub fn as_str(self) -> &'static str {
        match self {
            SpillReason::WarmerPrefix => "warmer_prefix",
            SpillReason::Overloaded => "overloaded",
            SpillReason::NoLocalReplica => "no_local_replica",
        }
    }
}

/// The regional part of a decision's explanation.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct RegionNote {
    /// The deciding gateway's region.
    pub home: RegionId,
    /// The region the request went to, when it left home.
    pub spilled_to: Option<RegionId>,
    /// Why it left home.
    pub reason: Option<SpillReason>,
    /// Best local predicted TTFT in ms (`null` in JSON when no local replica is eligible).
    pub local_ttft_ms: f64,
    /// Best remote predicted TTFT including the round trip, in ms (`null` when none).
    pub remote_ttft_ms: f64,
    /// Round trip to the best remote replica's region, in ms.
    pub rtt_ms: f64,
}

/// The prefill side of a split request, as the decode decision's explanation carries it.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct PrefillNote {
    /// The prefill replica the decode replica fetches the KV from.
    pub replica: ReplicaId,
    /// Prefix blocks the prefill replica is predicted to hold already.
    pub predicted_cached_blocks: u32,
    /// Prompt tokens the decode replica would have computed itself.
    pub uncached_tokens: u32,
    /// The rule that chose the prefill replica.
    pub branch: Branch,
    /// The prefill candidates' scores.
    pub candidates: Vec<CandidateScore>,
}

//! What a simulated checkpoint rollout did: its arm, when it started, and when the
//! pre-warm replay finished (the share's ramp reached the target).

use serde::Serialize;

/// One rollout arm's facts.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct RolloutSummary {
    /// `naive` or `prewarm`.
    pub arm: String,
    /// When the new replicas joined, seconds of virtual time.
    pub at_s: f64,
    /// Target share of conversations on the new checkpoint.
    pub target: f64,
    /// Replicas on the new checkpoint.
    pub new_replicas: u32,
    /// Seconds after `at_s` when the last pre-warm prompt finished (prewarm arm).
    pub prewarm_done_after_s: Option<f64>,
    /// Completed requests served by the new checkpoint, as a fraction of all completed.
    pub new_checkpoint_share: f64,
}

//! What a simulated shared KV tier did for the hit rate.

use serde::Serialize;

/// One `--kv-tier` arm's facts. `local_hit_rate + tier_hit_rate` is the run's
/// `cache_hit_rate` (token-weighted over completed requests).
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct TierSummary {
    /// Whether the arm had a tier.
    pub on: bool,
    /// Tier load bandwidth, tokens/s (arms with a tier).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tokens_per_s: Option<f64>,
    /// Cost of one lookup, ms (arms with a tier).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub lookup_ms: Option<f64>,
    /// Prompt tokens found in the serving replica's own cache, as a fraction of all.
    pub local_hit_rate: f64,
    /// Prompt tokens loaded from the shared tier, as a fraction of all.
    pub tier_hit_rate: f64,
}

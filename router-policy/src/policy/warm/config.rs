//! Parameters of `warm` and their ranges.

use crate::error::RouteError;
use crate::policy::request::check_range;
use serde::{Deserialize, Serialize};

/// Parameters of `warm`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct WarmConfig {
    /// Prefill rate assumed for a replica that reports none (tokens/s) while no eligible
    /// replica has measured one; otherwise an unmeasured replica gets its peers' mean.
    pub default_prefill_tokens_per_s: f64,
    /// KV usage above which the pressure barrier applies, and above which a replica's cache
    /// counts as full (no hot prefix is copied into it).
    pub kv_pressure_threshold: f64,
    /// Scale of the KV pressure barrier in ms (SMG least_load uses 150 ms).
    pub kv_pressure_weight_ms: f64,
    /// Weight of the recompute charge: a replica that would recompute `d` more prompt tokens
    /// than the deepest holder pays `recompute_weight * d / rate` on top of its TTFT (the
    /// prefill work it adds that later requests queue behind, and the duplicated prefix).
    pub recompute_weight: f64,
    /// Least queue-wait excess (ms) over the least queued alternative that marks a holder
    /// overloaded enough to copy its hot prefix elsewhere.
    pub spread_queue_gap_ms: f64,
    /// The queue-wait excess must also exceed this multiple of the prefix's own prefill time.
    pub spread_prefill_multiple: f64,
    /// Spread only if the target's TTFT is at most this multiple of the holder's.
    pub spread_max_slowdown: f64,
    /// Blocks that key a prefix's home replica.
    pub home_prefix_blocks: u32,
    /// Candidates within this many ms of the best cost count as tied when someone holds the
    /// prefix; ties go to holders (cache affinity is worth a little latency).
    pub tie_tolerance_ms: f64,
    /// Tie window for cold prompts (nobody holds the prefix); ties go to the prefix's
    /// rendezvous home, so independent gateways agree.
    pub cold_tie_tolerance_ms: f64,
    /// A measured prefill rate within this fraction of the mean of the eligible replicas'
    /// measured rates counts as that mean: identical replicas measure rates that differ by
    /// noise (~1% on a shared machine), and without it the one that happened to measure
    /// faster took every new prefix (its cold cost was lower by more than the tie window).
    pub rate_noise_ratio: f64,
    /// Initial estimate of uncached tokens per in-flight request.
    pub initial_request_tokens: f64,
    /// Rate of loading prompt tokens from the shared KV tier (tokens/s) assumed for a
    /// replica that has measured none (`tier_tokens_per_s` 0 in its load report).
    pub default_tier_tokens_per_s: f64,
    /// Fixed cost of one shared-tier lookup (the round trip before blocks arrive), ms.
    pub tier_lookup_ms: f64,
    /// Time a replica takes to load a request's LoRA adapter when it does not have it
    /// loaded (ms): vLLM loads an adapter's weights before the request's prefill, and a
    /// full set of adapter slots evicts another adapter first.
    pub adapter_load_ms: f64,
}

impl Default for WarmConfig {
    fn default() -> Self {
        Self {
            default_prefill_tokens_per_s: 4000.0,
            kv_pressure_threshold: 0.9,
            kv_pressure_weight_ms: 150.0,
            recompute_weight: 1.0,
            spread_queue_gap_ms: 500.0,
            spread_prefill_multiple: 2.0,
            spread_max_slowdown: 2.0,
            home_prefix_blocks: 4,
            tie_tolerance_ms: 150.0,
            cold_tie_tolerance_ms: 10.0,
            rate_noise_ratio: 0.05,
            initial_request_tokens: 512.0,
            default_tier_tokens_per_s: 20_000.0,
            tier_lookup_ms: 2.0,
            adapter_load_ms: 50.0,
        }
    }
}

impl WarmConfig {
    /// Checks the ranges.
    pub fn validate(&self) -> Result<(), RouteError> {
        let ranges = [
            (
                "warm.default_prefill_tokens_per_s",
                self.default_prefill_tokens_per_s,
                1.0,
                1e9,
            ),
            (
                "warm.kv_pressure_threshold",
                self.kv_pressure_threshold,
                0.0,
                1.0,
            ),
            (
                "warm.kv_pressure_weight_ms",
                self.kv_pressure_weight_ms,
                0.0,
                1e9,
            ),
            ("warm.recompute_weight", self.recompute_weight, 0.0, 100.0),
            (
                "warm.spread_queue_gap_ms",
                self.spread_queue_gap_ms,
                0.0,
                1e9,
            ),
            (
                "warm.spread_prefill_multiple",
                self.spread_prefill_multiple,
                0.0,
                1e6,
            ),
            (
                "warm.spread_max_slowdown",
                self.spread_max_slowdown,
                1.0,
                1e6,
            ),
            ("warm.tie_tolerance_ms", self.tie_tolerance_ms, 0.0, 1e9),
            (
                "warm.cold_tie_tolerance_ms",
                self.cold_tie_tolerance_ms,
                0.0,
                1e9,
            ),
            ("warm.rate_noise_ratio", self.rate_noise_ratio, 0.0, 1.0),
            (
                "warm.initial_request_tokens",
                self.initial_request_tokens,
                0.0,
                1e9,
            ),
            (
                "warm.default_tier_tokens_per_s",
                self.default_tier_tokens_per_s,
                1.0,
                1e12,
            ),
            ("warm.tier_lookup_ms", self.tier_lookup_ms, 0.0, 1e6),
            ("warm.adapter_load_ms", self.adapter_load_ms, 0.0, 1e6),
        ];
        for (key, v, lo, hi) in ranges {
            check_range(key, v, lo, hi)?;
        }
        if self.home_prefix_blocks == 0 {
            return Err(RouteError::invalid(
                "warm.home_prefix_blocks",
                "must be at least 1",
            ));
        }
        Ok(())
    }
}

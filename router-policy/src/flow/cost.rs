//! The work a request is charged for in fair sharing: its predicted prefill.

use serde::{Deserialize, Serialize};

/// Predicted prefill work in thousandths of a computed prompt token (so a cached token
/// at a fraction such as 0.1 is charged exactly).
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize,
)]
#[serde(transparent)]
pub struct Cost(pub u64);

impl Cost {
    /// The cost in computed-token units (rounded down).
    pub fn tokens(self) -> u64 {
        self.0 / 1000
    }
}

/// The cost of a prompt of `prompt_tokens`, `cached_tokens` of which the chosen replica
/// is predicted to hold: uncached tokens at full price, cached ones at `cached_fraction`
/// (0 to 1; clamped). Never zero: an empty or fully cached prompt still costs one token,
/// so a tenant cannot be served for free without bound.
pub fn prefill_cost(prompt_tokens: u32, cached_tokens: u32, cached_fraction: f64) -> Cost {
    let cached = cached_tokens.min(prompt_tokens);
    let uncached = u64::from(prompt_tokens - cached) * 1000;
    let frac = if cached_fraction.is_finite() {
        cached_fraction.clamp(0.0, 1.0)
    } else {
        1.0
    };
    let permille = (frac * 1000.0).round() as u64;
    let cached = u64::from(cached) * permille;
    Cost((uncached + cached).max(1000))
}

//! The tier's measured load rate: prompt tokens loaded per second of lookup (round trips,
//! checks and the import into the pool), averaged over the lookups that loaded something
//! the same way as the measured prefill and decode rates. The replica reports it in its
//! load (`tier_tokens_per_s`) and the router's `warm` policy prices a fetch with it, as it
//! prices a prefill with the measured prefill rate.

use crate::server::metrics::ewma;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// A shared, lock-free rate (0 until the first lookup that loaded a block).
#[derive(Clone, Debug, Default)]
pub struct TierRate {
    bits: Arc<AtomicU64>,
}

impl TierRate {
    /// Tokens per second, 0 when nothing was measured.
    pub fn get(&self) -> f64 {
        f64::from_bits(self.bits.load(Ordering::Relaxed))
    }

    /// Folds in one lookup that loaded `tokens` in `took`.
    pub fn observe(&self, tokens: usize, took: Duration) {
        let secs = took.as_secs_f64().max(1e-6);
        let sample = tokens as f64 / secs;
        // One writer at a time in practice; a lost update under a race only drops a sample.
        let new = ewma(self.get(), sample);
        self.bits.store(new.to_bits(), Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn starts_unknown_then_averages() {
        let r = TierRate::default();
        assert_eq!(r.get(), 0.0);
        r.observe(1000, Duration::from_millis(100));
        assert!((r.get() - 10_000.0).abs() < 1e-6);
        r.observe(2000, Duration::from_millis(100));
        assert!((r.get() - 12_000.0).abs() < 1e-6, "{}", r.get());
    }
}

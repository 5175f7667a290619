//! Carrying a tenant's limiter state across a reload that changed its limits: requests in
//! flight keep counting (the counter is shared, and their permits release it), and the
//! request and token buckets keep the share of their capacity that was used, rescaled to
//! the new capacity. A reload never hands a tenant a fresh burst.

use super::{TenantLimiter, TokenBucket};
use crate::config::TenantLimits;
use governor::DefaultDirectRateLimiter;
use std::num::NonZeroU32;
use std::time::Instant;

impl TenantLimiter {
    /// A limiter for `limits` that continues `previous` (the tenant's limiter before the
    /// reload, which is dropped afterwards: counting its request allowance consumes it).
    pub(crate) fn carried_from(limits: &TenantLimits, previous: &TenantLimiter) -> Self {
        let mut new = TenantLimiter::new(limits);
        new.in_flight = previous.in_flight.clone();
        let now = Instant::now();
        if let (Some(new_b), Some(old_b)) = (&new.tokens, &previous.tokens) {
            new_b.lock().continue_from(&mut old_b.lock(), now);
        }
        if let (Some(new_r), Some(old_r)) = (&new.requests, &previous.requests) {
            let old_burst = previous.limits.request_burst.max(1);
            let new_burst = limits.request_burst.max(1);
            let left = drain(old_r, old_burst);
            // Round the allowance left down: never more than was left, in proportion.
            let keep = (u64::from(left) * u64::from(new_burst) / u64::from(old_burst)) as u32;
            if let Some(used) = NonZeroU32::new(new_burst.saturating_sub(keep)) {
                let _ = new_r.check_n(used);
            }
        }
        new
    }
}

/// Requests `r` would admit now (at most `burst`), found by taking them: the largest
/// powers of two first, so at most 32 calls.
fn drain(r: &DefaultDirectRateLimiter, burst: u32) -> u32 {
    let mut left = 0u32;
    for bit in (0..32).rev() {
        let n = 1u32 << bit;
        if n > burst.saturating_sub(left) {
            continue;
        }
        if let Some(n) = NonZeroU32::new(n) {
            if matches!(r.check_n(n), Ok(Ok(()))) {
                left += n.get();
            }
        }
    }
    left
}

impl TokenBucket {
    /// Takes over `old`'s level as the same share of this bucket's capacity (a debt stays
    /// a debt, in proportion).
    fn continue_from(&mut self, old: &mut TokenBucket, now: Instant) {
        old.refill(now);
        let share = if old.capacity > 0.0 {
            old.level / old.capacity
        } else {
            1.0
        };
        self.level = share * self.capacity;
        self.at = now;
    }
}

#[cfg(test)]
mod tests {
    use super::super::reserve;
    use super::*;
    use std::sync::Arc;

    fn limiter(rpm: u32, burst: u32, tpm: u64, conc: u32) -> Arc<TenantLimiter> {
        Arc::new(TenantLimiter::new(&TenantLimits {
            requests_per_minute: rpm,
            request_burst: burst,
            tokens_per_minute: tpm,
            max_concurrent: conc,
        }))
    }

    #[test]
    fn an_exhausted_request_allowance_stays_exhausted_and_rescales() {
        let old = limiter(60, 4, 0, 0);
        for _ in 0..4 {
            assert!(reserve(&old, "t", 1, Instant::now()).is_ok());
        }
        let new = Arc::new(TenantLimiter::carried_from(
            &TenantLimits {
                requests_per_minute: 120,
                request_burst: 8,
                ..TenantLimits::default()
            },
            &old,
        ));
        // A fresh limiter would admit 8 at once; the carried one at most the refill since.
        assert!(reserve(&new, "t", 1, Instant::now()).is_err());

        // Half used before, half left after, at the new size.
        let old = limiter(60, 4, 0, 0);
        for _ in 0..2 {
            assert!(reserve(&old, "t", 1, Instant::now()).is_ok());
        }
        let new = Arc::new(TenantLimiter::carried_from(
            &TenantLimits {
                requests_per_minute: 60,
                request_burst: 10,
                ..TenantLimits::default()
            },
            &old,
        ));
        let admitted = (0..10)
            .filter(|_| reserve(&new, "t", 1, Instant::now()).is_ok())
            .count();
        assert!((5..=6).contains(&admitted), "{admitted}");
    }

    #[test]
    fn token_level_keeps_its_share_and_in_flight_keeps_counting() {
        let old = limiter(0, 0, 1000, 2);
        let (p1, _) = reserve(&old, "t", 900, Instant::now()).unwrap();
        let (p2, _) = reserve(&old, "t", 1, Instant::now()).unwrap();
        let new = Arc::new(TenantLimiter::carried_from(
            &TenantLimits {
                tokens_per_minute: 2000,
                max_concurrent: 3,
                ..TenantLimits::default()
            },
            &old,
        ));
        // 99 of 1000 left, so about 198 of 2000: 300 does not fit, 150 does.
        assert!(reserve(&new, "t", 300, Instant::now()).is_err());
        assert_eq!(
            new.in_flight(),
            2,
            "requests admitted before the reload count"
        );
        let (p3, _) = reserve(&new, "t", 150, Instant::now()).unwrap();
        assert!(
            reserve(&new, "t", 1, Instant::now()).is_err(),
            "max_concurrent 3 counts the 2 admitted before the reload"
        );
        drop((p1, p2, p3));
        assert_eq!(new.in_flight(), 0);
    }
}

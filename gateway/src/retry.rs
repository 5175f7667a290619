//! Retry budget and backoff: retries are at most `ratio` of recent requests plus a small
//! floor per second, spaced by full-jitter exponential backoff, never shorter than an
//! upstream's Retry-After.

use parking_lot::Mutex;
use rand::Rng;
use std::time::{Duration, Instant};

/// Gateway-wide retry budget over a sliding one-second window (two buckets).
#[derive(Debug)]
pub(crate) struct RetryBudget {
    inner: Mutex<Window>,
}

#[derive(Debug)]
struct Window {
    start: Instant,
    requests: u64,
    retries: u64,
    prev_requests: u64,
    prev_retries: u64,
}

impl RetryBudget {
    /// An empty budget.
    pub(crate) fn new(now: Instant) -> Self {
        Self {
            inner: Mutex::new(Window {
                start: now,
                requests: 0,
                retries: 0,
                prev_requests: 0,
                prev_retries: 0,
            }),
        }
    }

    fn roll(w: &mut Window, now: Instant) {
        let age = now.saturating_duration_since(w.start);
        if age >= Duration::from_secs(2) {
            *w = Window {
                start: now,
                requests: 0,
                retries: 0,
                prev_requests: 0,
                prev_retries: 0,
            };
        } else if age >= Duration::from_secs(1) {
            w.prev_requests = w.requests;
            w.prev_retries = w.retries;
            w.requests = 0;
            w.retries = 0;
            w.start += Duration::from_secs(1);
        }
    }

    /// Counts a first attempt.
    pub(crate) fn record_request(&self, now: Instant) {
        let mut w = self.inner.lock();
        Self::roll(&mut w, now);
        w.requests += 1;
    }

    /// Takes one retry from the budget, if any is left.
    pub(crate) fn try_retry(&self, now: Instant, ratio: f64, floor_per_s: u32) -> bool {
        let mut w = self.inner.lock();
        Self::roll(&mut w, now);
        let requests = w.requests + w.prev_requests;
        let retries = w.retries + w.prev_retries;
        // Two one-second buckets: the floor applies per second.
        let allowed = (requests as f64 * ratio).floor() as u64 + 2 * u64::from(floor_per_s);
        if retries < allowed {
            w.retries += 1;
            true
        } else {
            false
        }
    }
}

/// Full-jitter backoff before retry `attempt` (1 = first retry): uniform in
/// `[0, min(max, base * 2^(attempt-1))]`, but never below `retry_after`.
pub(crate) fn backoff(
    attempt: u32,
    base: Duration,
    max: Duration,
    retry_after: Option<Duration>,
) -> Duration {
    let exp = base
        .saturating_mul(1u32 << attempt.saturating_sub(1).min(16))
        .min(max);
    let jitter = if exp.is_zero() {
        Duration::ZERO
    } else {
        rand::thread_rng().gen_range(Duration::ZERO..=exp)
    };
    match retry_after {
        Some(ra) => jitter.max(ra.min(max)),
        None => jitter,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn budget_allows_ratio_plus_floor() {
        let t0 = Instant::now();
        let b = RetryBudget::new(t0);
        for _ in 0..100 {
            b.record_request(t0);
        }
        let mut granted = 0;
        for _ in 0..100 {
            if b.try_retry(t0, 0.2, 3) {
                granted += 1;
            }
        }
        assert_eq!(granted, 20 + 6);
        // A window later the old requests still count (previous bucket), two later not.
        let t3 = t0 + Duration::from_millis(3100);
        let mut granted = 0;
        for _ in 0..100 {
            if b.try_retry(t3, 0.2, 3) {
                granted += 1;
            }
        }
        assert_eq!(granted, 6);
    }

    #[test]
    fn backoff_is_bounded_and_honours_retry_after() {
        for attempt in 1..10 {
            let d = backoff(
                attempt,
                Duration::from_millis(10),
                Duration::from_millis(200),
                None,
            );
            assert!(d <= Duration::from_millis(200));
            assert!(d <= Duration::from_millis(10) * (1 << (attempt - 1)));
        }
        let d = backoff(
            1,
            Duration::from_millis(10),
            Duration::from_secs(2),
            Some(Duration::from_secs(1)),
        );
        assert!(d >= Duration::from_secs(1));
    }
}

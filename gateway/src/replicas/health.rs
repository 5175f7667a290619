//! Passive outlier ejection with half-open re-admission.
//!
//! A replica is ejected after `eject_after_failures` consecutive failures (request errors,
//! timeouts, 502/503/504 answers, failed probes) if the ejection cap allows it (at least
//! one replica is always ejectable). When its ejection time passes it is half-open:
//! routable again, and the next result decides: a success re-admits it, a failure ejects
//! it again for longer.
//!
//! Apart from ejection, a replica that answers 429 or 503 with `Retry-After` cools down:
//! nothing is routed to it until that time passes ([`HealthState::cool_down`]). A cooldown
//! is the replica's own word, not a failure: it does not count against the ejection cap.

use serde::Serialize;
use std::time::{Duration, Instant};

/// Where a replica stands.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) enum Phase {
    /// Taking traffic.
    #[default]
    Healthy,
    /// Out of rotation until `until`, then half-open.
    Ejected {
        /// End of the ejection.
        until: Instant,
    },
}

/// Health state of one replica.
#[derive(Clone, Debug, Default)]
pub(crate) struct HealthState {
    phase: Phase,
    consecutive_failures: u32,
    ejections: u32,
    /// No requests before this (the replica's `Retry-After`).
    cooldown_until: Option<Instant>,
}

/// What a failure did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum FailureOutcome {
    /// Counted; still routable.
    Counted,
    /// The replica was ejected now.
    Ejected,
    /// It would have been ejected but the cap forbids it.
    CapReached,
}

/// Health for the admin API.
#[derive(Clone, Debug, Serialize)]
pub(crate) struct HealthView {
    /// `healthy`, `ejected` or `half_open`.
    pub state: &'static str,
    /// Consecutive failures.
    pub consecutive_failures: u32,
    /// Times ejected so far.
    pub ejections: u32,
    /// Milliseconds left of the cooldown the replica asked for (`Retry-After`); 0: none.
    pub cooldown_ms: u64,
}

impl HealthState {
    /// Whether routing may pick the replica now: healthy or half-open, and not cooling down.
    pub(crate) fn routable(&self, now: Instant) -> bool {
        let admitted = match self.phase {
            Phase::Healthy => true,
            Phase::Ejected { until } => now >= until,
        };
        admitted && !self.cooling_down(now)
    }

    /// Ejected and not yet half-open (a cooldown is not an ejection).
    pub(crate) fn is_ejected(&self, now: Instant) -> bool {
        matches!(self.phase, Phase::Ejected { until } if now < until)
    }

    /// Within a cooldown the replica asked for.
    pub(crate) fn cooling_down(&self, now: Instant) -> bool {
        self.cooldown_until.is_some_and(|t| now < t)
    }

    /// The replica asked for no requests for `wait` (`Retry-After` on a 429 or 503): none
    /// is routed to it before `now + wait`. A later, longer cooldown extends it; a shorter
    /// one never cuts it.
    pub(crate) fn cool_down(&mut self, now: Instant, wait: Duration) {
        let until = now + wait;
        if self.cooldown_until.is_none_or(|t| t < until) {
            self.cooldown_until = Some(until);
        }
    }

    /// Records a success: resets the failure count and re-admits a half-open replica.
    /// Returns true when this re-admitted it.
    pub(crate) fn record_success(&mut self) -> bool {
        self.consecutive_failures = 0;
        let readmitted = matches!(self.phase, Phase::Ejected { .. });
        self.phase = Phase::Healthy;
        readmitted
    }

    /// Records a failure at `now`. `may_eject` is false when the ejection cap is reached.
    pub(crate) fn record_failure(
        &mut self,
        now: Instant,
        threshold: u32,
        base: Duration,
        may_eject: bool,
    ) -> FailureOutcome {
        self.consecutive_failures = self.consecutive_failures.saturating_add(1);
        let half_open = matches!(self.phase, Phase::Ejected { until } if now >= until);
        if matches!(self.phase, Phase::Ejected { until } if now < until) {
            return FailureOutcome::Counted;
        }
        if half_open || self.consecutive_failures >= threshold {
            if !may_eject && !half_open {
                return FailureOutcome::CapReached;
            }
            self.ejections += 1;
            let factor = self.ejections.min(8);
            self.phase = Phase::Ejected {
                until: now + base * factor,
            };
            return FailureOutcome::Ejected;
        }
        FailureOutcome::Counted
    }

    /// Admin view.
    pub(crate) fn view(&self, now: Instant) -> HealthView {
        let state = match self.phase {
            Phase::Healthy => "healthy",
            Phase::Ejected { until } if now < until => "ejected",
            Phase::Ejected { .. } => "half_open",
        };
        HealthView {
            state,
            consecutive_failures: self.consecutive_failures,
            ejections: self.ejections,
            cooldown_ms: self
                .cooldown_until
                .map_or(0, |t| t.saturating_duration_since(now).as_millis() as u64),
        }
    }
}

/// How many replicas may be ejected at once out of `total`: `ratio` of them, at least one.
pub(crate) fn max_ejected(total: usize, ratio: f64) -> usize {
    ((total as f64 * ratio).floor() as usize).max(1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ejects_after_threshold_and_readmits_after_success() {
        let t0 = Instant::now();
        let base = Duration::from_secs(5);
        let mut h = HealthState::default();
        assert_eq!(h.record_failure(t0, 3, base, true), FailureOutcome::Counted);
        assert_eq!(h.record_failure(t0, 3, base, true), FailureOutcome::Counted);
        assert_eq!(h.record_failure(t0, 3, base, true), FailureOutcome::Ejected);
        assert!(!h.routable(t0 + Duration::from_secs(4)));
        let later = t0 + Duration::from_secs(6);
        assert!(h.routable(later));
        assert_eq!(h.view(later).state, "half_open");
        assert!(h.record_success());
        assert_eq!(h.view(later).state, "healthy");
    }

    #[test]
    fn half_open_failure_reejects_for_longer() {
        let t0 = Instant::now();
        let base = Duration::from_secs(1);
        let mut h = HealthState::default();
        assert_eq!(h.record_failure(t0, 1, base, true), FailureOutcome::Ejected);
        let t1 = t0 + Duration::from_millis(1500);
        assert!(h.routable(t1));
        assert_eq!(h.record_failure(t1, 1, base, true), FailureOutcome::Ejected);
        assert!(!h.routable(t1 + Duration::from_millis(1900)));
        assert!(h.routable(t1 + Duration::from_millis(2100)));
    }

    #[test]
    fn cap_allows_at_least_one_ejection() {
        assert_eq!(max_ejected(2, 0.1), 1);
        assert_eq!(max_ejected(10, 0.5), 5);
        let mut h = HealthState::default();
        let t0 = Instant::now();
        assert_eq!(
            h.record_failure(t0, 1, Duration::from_secs(1), false),
            FailureOutcome::CapReached
        );
        assert!(h.routable(t0));
    }

    #[test]
    fn a_cooldown_keeps_the_replica_out_until_it_passes_without_ejecting_it() {
        let t0 = Instant::now();
        let mut h = HealthState::default();
        h.cool_down(t0, Duration::from_secs(2));
        assert!(!h.routable(t0 + Duration::from_millis(1999)));
        assert!(!h.is_ejected(t0), "a cooldown is not an ejection");
        assert_eq!(h.view(t0).state, "healthy");
        assert_eq!(h.view(t0).cooldown_ms, 2000);
        // A shorter cooldown later never cuts the longer one.
        h.cool_down(t0 + Duration::from_millis(500), Duration::from_millis(100));
        assert!(!h.routable(t0 + Duration::from_millis(1999)));
        assert!(h.routable(t0 + Duration::from_secs(2)));
    }
}

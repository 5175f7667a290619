//! Passive outlier ejection with half-open re-admission.
//!
//! A replica is ejected after `eject_after_failures` consecutive failures (request errors,
//! timeouts, failed probes) if the ejection cap allows it (at least one replica is always
//! ejectable). When its ejection time passes it is half-open: routable again, and the next
//! result decides: a success re-admits it, a failure ejects it again for longer.

use serde::Serialize;
use std::time::{Duration, Instant};

/// Where a replica stands.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Phase {
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
pub struct HealthState {
    phase: Phase,
    consecutive_failures: u32,
    ejections: u32,
}

/// What a failure did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FailureOutcome {
    /// Counted; still routable.
    Counted,
    /// The replica was ejected now.
    Ejected,
    /// It would have been ejected but the cap forbids it.
    CapReached,
}

/// Health for the admin API.
#[derive(Clone, Debug, Serialize)]
pub struct HealthView {
    /// `healthy`, `ejected` or `half_open`.
    pub state: &'static str,
    /// Consecutive failures.
    pub consecutive_failures: u32,
    /// Times ejected so far.
    pub ejections: u32,
}

impl HealthState {
    /// Whether routing may pick the replica now (healthy or half-open).
    pub fn routable(&self, now: Instant) -> bool {
        match self.phase {
            Phase::Healthy => true,
            Phase::Ejected { until } => now >= until,
        }
    }

    /// Ejected and not yet half-open.
    pub fn is_ejected(&self, now: Instant) -> bool {
        !self.routable(now)
    }

    /// Records a success: resets the failure count and re-admits a half-open replica.
    /// Returns true when this re-admitted it.
    pub fn record_success(&mut self) -> bool {
        self.consecutive_failures = 0;
        let readmitted = matches!(self.phase, Phase::Ejected { .. });
        self.phase = Phase::Healthy;
        readmitted
    }

    /// Records a failure at `now`. `may_eject` is false when the ejection cap is reached.
    pub fn record_failure(
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
    pub fn view(&self, now: Instant) -> HealthView {
        let state = match self.phase {
            Phase::Healthy => "healthy",
            Phase::Ejected { until } if now < until => "ejected",
            Phase::Ejected { .. } => "half_open",
        };
        HealthView {
            state,
            consecutive_failures: self.consecutive_failures,
            ejections: self.ejections,
        }
    }
}

/// How many replicas may be ejected at once out of `total`: `ratio` of them, at least one.
pub fn max_ejected(total: usize, ratio: f64) -> usize {
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
}

//! Whether this gateway reaches Redis. A failed or slow call marks it degraded (a metric
//! and one log line); from then on requests do not wait on Redis at all, and a probe
//! retries every `probe_ms` until Redis answers, then marks it healthy again.

use crate::metrics::FleetMetrics;
use std::sync::atomic::{AtomicBool, Ordering};

/// The degraded flag and its metric.
#[derive(Debug)]
pub(crate) struct Health {
    degraded: AtomicBool,
    metrics: FleetMetrics,
}

impl Health {
    /// Starts degraded: nothing is known about Redis until the first connection.
    pub(crate) fn new(metrics: FleetMetrics) -> Self {
        metrics.degraded.set(1);
        Self {
            degraded: AtomicBool::new(true),
            metrics,
        }
    }

    /// Whether requests should skip Redis.
    pub(crate) fn is_degraded(&self) -> bool {
        self.degraded.load(Ordering::Acquire)
    }

    /// Marks Redis unreachable; true when this call made the change (start a probe).
    pub(crate) fn fail(&self, why: &dyn std::fmt::Display) -> bool {
        self.metrics.errors.inc();
        if self.degraded.swap(true, Ordering::AcqRel) {
            return false;
        }
        self.metrics.degraded.set(1);
        tracing::warn!(error = %why, "shared state degraded: Redis unreachable, serving known tenants under local fallback limits");
        true
    }

    /// Marks Redis reachable again.
    pub(crate) fn recover(&self) {
        if self.degraded.swap(false, Ordering::AcqRel) {
            self.metrics.degraded.set(0);
            tracing::info!("shared state healthy: Redis reachable, shared limits in force");
        }
    }

    /// The metrics this flag reports to.
    pub(crate) fn metrics(&self) -> &FleetMetrics {
        &self.metrics
    }
}

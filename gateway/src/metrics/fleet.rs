//! The fleet's shared-state (Redis) series: `state_degraded`, `state_fallback_admissions_total`,
//! `state_redis_errors_total`, `state_redis_seconds` and the settlement queue's
//! `state_settlements_{queued,replayed,dropped}_total`.

use prometheus::{Histogram, HistogramOpts, IntCounter, IntGauge, Registry};

/// Handles on the fleet's shared-state (Redis) series.
#[derive(Clone, Debug)]
pub(crate) struct FleetMetrics {
    /// 1 while Redis is unreachable and local fallback limits apply.
    pub degraded: IntGauge,
    /// Admissions decided by the local fallback limits.
    pub fallback_admissions: IntCounter,
    /// Redis calls that failed or timed out.
    pub errors: IntCounter,
    /// Time of one admission's Redis round trip.
    pub redis_seconds: Histogram,
    /// Settlements queued because Redis did not answer them.
    pub settlements_queued: IntCounter,
    /// Queued settlements replayed to Redis.
    pub settlements_replayed: IntCounter,
    /// Settlements dropped because the queue was full.
    pub settlements_dropped: IntCounter,
}

impl FleetMetrics {
    /// Creates the series and registers them in `registry`.
    pub(crate) fn register(registry: &Registry) -> Self {
        let degraded = IntGauge::new(
            "state_degraded",
            "1 while Redis is unreachable and tenants are served under local fallback limits",
        )
        .expect("valid metric");
        let fallback_admissions = IntCounter::new(
            "state_fallback_admissions_total",
            "Admission decisions made by the local fallback limits (Redis unreachable)",
        )
        .expect("valid metric");
        let errors = IntCounter::new(
            "state_redis_errors_total",
            "Redis calls that failed or ran past state.timeout_ms",
        )
        .expect("valid metric");
        let redis_seconds = Histogram::with_opts(
            HistogramOpts::new("state_redis_seconds", "One admission's Redis round trip").buckets(
                vec![
                    0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1,
                ],
            ),
        )
        .expect("valid metric");
        let counter = |name: &str, help: &str| IntCounter::new(name, help).expect("valid metric");
        let settlements_queued = counter(
            "state_settlements_queued_total",
            "Settlements (token refunds, lease releases) queued because Redis did not answer them",
        );
        let settlements_replayed = counter(
            "state_settlements_replayed_total",
            "Queued settlements replayed to Redis after it answered again",
        );
        let settlements_dropped = counter(
            "state_settlements_dropped_total",
            "Settlements dropped because the settlement queue was full",
        );
        for m in [
            Box::new(degraded.clone()) as Box<dyn prometheus::core::Collector>,
            Box::new(fallback_admissions.clone()),
            Box::new(errors.clone()),
            Box::new(redis_seconds.clone()),
            Box::new(settlements_queued.clone()),
            Box::new(settlements_replayed.clone()),
            Box::new(settlements_dropped.clone()),
        ] {
            registry.register(m).expect("unique metric");
        }
        Self {
            degraded,
            fallback_admissions,
            errors,
            redis_seconds,
            settlements_queued,
            settlements_replayed,
            settlements_dropped,
        }
    }
}

//! Flow control series (issue 42), per tenant and class: time waited in the flow queue,
//! requests shed and why, and requests with a TTFT objective by whether they met it
//! (goodput is the `met` rate).

use prometheus::{HistogramOpts, HistogramVec, IntCounterVec, Opts, Registry};

/// Handles on the flow control series.
#[derive(Clone, Debug)]
pub(crate) struct FlowMetrics {
    /// `flow_queue_seconds{tenant, class}`: time waited for a slot (requests that waited).
    pub queue_seconds: HistogramVec,
    /// `flow_shed_total{tenant, class, reason}`: `tenant_queue_full`, `queue_full`,
    /// `deadline` (refused at arrival), `deadline_expired` (its wait used the objective
    /// up), `timeout` (`admission.queue_timeout_ms`).
    pub shed: IntCounterVec,
    /// `flow_objective_total{tenant, class, outcome}`: requests with a TTFT objective
    /// whose first body byte came, `met` or `missed`.
    pub objectives: IntCounterVec,
}

impl FlowMetrics {
    /// Creates the series and registers them in `registry`.
    pub(crate) fn register(registry: &Registry) -> Self {
        let queue_seconds = HistogramVec::new(
            HistogramOpts::new(
                "flow_queue_seconds",
                "Time a request waited in its tenant's flow queue for a replica slot",
            )
            .buckets(vec![
                0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0,
            ]),
            &["tenant", "class"],
        )
        .expect("valid metric");
        let shed = IntCounterVec::new(
            Opts::new(
                "flow_shed_total",
                "Requests shed by flow control, by reason",
            ),
            &["tenant", "class", "reason"],
        )
        .expect("valid metric");
        let objectives = IntCounterVec::new(
            Opts::new(
                "flow_objective_total",
                "Requests with a TTFT objective, by whether their first byte met it",
            ),
            &["tenant", "class", "outcome"],
        )
        .expect("valid metric");
        for m in [
            Box::new(queue_seconds.clone()) as Box<dyn prometheus::core::Collector>,
            Box::new(shed.clone()),
            Box::new(objectives.clone()),
        ] {
            registry.register(m).expect("unique metric");
        }
        Self {
            queue_seconds,
            shed,
            objectives,
        }
    }
}

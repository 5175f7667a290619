//! What the simulated gateway's admission did: goodput against the TTFT objective, per
//! tenant and class.

use serde::Serialize;

/// One `--admission` arm's facts.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct AdmissionSummary {
    /// `fcfs` or `flow`.
    pub mode: String,
    /// The TTFT objective, ms.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub objective_ms: Option<f64>,
    /// Seconds from the first arrival to the last (goodput's denominator).
    pub span_s: f64,
    /// Requests that completed within the objective.
    pub met: usize,
    /// Requests the gateway refused (shed, queue full, queue timeout).
    pub refused: usize,
    /// `met / span_s`.
    pub goodput_per_s: f64,
    /// Per tenant and class.
    pub groups: Vec<AdmissionGroup>,
}

/// One tenant's requests of one class.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct AdmissionGroup {
    /// Tenant index.
    pub tenant: u32,
    /// `interactive` or `batch`.
    pub class: String,
    /// Requests sent.
    pub requests: usize,
    /// Requests completed.
    pub completed: usize,
    /// Requests refused by the gateway.
    pub refused: usize,
    /// Completed within the objective.
    pub met: usize,
    /// TTFT median of the completed, ms.
    pub median_ttft_ms: f64,
    /// TTFT 99th percentile of the completed, ms.
    pub p99_ttft_ms: f64,
    /// `met / span_s`.
    pub goodput_per_s: f64,
}

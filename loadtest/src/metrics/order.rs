//! How a simulated replica's prefill order did against the no-queueing floor.

use serde::Serialize;

/// One `--replica-order` arm's facts. The floor of a request is its own uncached prompt
/// tokens at the profile's prefill rate: its TTFT on an idle replica, less step overheads.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct OrderSummary {
    /// `fcfs` or `shortest`.
    pub order: String,
    /// The aging slack of `shortest`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub slack: Option<u32>,
    /// Median of the completed requests' floors, ms.
    pub median_floor_ms: f64,
    /// 99th percentile of the floors, ms.
    pub p99_floor_ms: f64,
    /// Median TTFT / median floor.
    pub median_ttft_over_floor: f64,
    /// Median over requests of TTFT / own floor.
    pub median_request_ratio: f64,
}

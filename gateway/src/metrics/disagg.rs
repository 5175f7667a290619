//! Prefill/decode disaggregation series: KV transfers as the decode replicas report them
//! (`kv_transfers_total{prefill, outcome}`, read from each split request's
//! `x-warmpath-kv-transfer` response header).

use prometheus::{IntCounterVec, Opts, Registry};

/// Handles on the disaggregation series.
#[derive(Clone, Debug)]
pub(crate) struct DisaggMetrics {
    /// Split requests by prefill replica and transfer outcome (`ok`, `partial`, `failed`,
    /// `skipped`).
    pub transfers: IntCounterVec,
}

impl DisaggMetrics {
    /// Creates the series and registers them in `registry`.
    pub(crate) fn register(registry: &Registry) -> Self {
        let transfers = IntCounterVec::new(
            Opts::new(
                "kv_transfers_total",
                "Split requests by prefill replica and KV transfer outcome",
            ),
            &["prefill", "outcome"],
        )
        .expect("valid metric");
        registry
            .register(Box::new(transfers.clone()))
            .expect("unique metric");
        Self { transfers }
    }
}

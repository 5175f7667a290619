//! What a simulated role-split (P/D) cluster did: how it was split and what the KV
//! transfers cost.

use serde::Serialize;

/// One role-split arm's facts (`prefill_replicas` 0 = the co-located arm).
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct DisaggSummary {
    /// Replicas that only prefill.
    pub prefill_replicas: u32,
    /// Replicas that decode (all of them when co-located).
    pub decode_replicas: u32,
    /// Requests split (prefilled on a prefill replica, decoded elsewhere), as a fraction of
    /// all requests.
    pub split_fraction: f64,
    /// Mean tokens whose KV a split request transferred to its decode replica.
    pub mean_transferred_tokens: f64,
    /// Mean prompt tokens a split request found cached on its prefill replica.
    pub mean_prefill_cached_tokens: f64,
    /// Mean time from the end of a split request's prefill to its decode replica holding
    /// the KV (the transfer the prefill's streaming did not hide), ms.
    pub mean_exposed_transfer_ms: f64,
    /// p99 of the same, ms.
    pub p99_exposed_transfer_ms: f64,
    /// Mean prompt tokens a decode replica computed per request it served (unsplit
    /// prompts, partial tail blocks, KV it lost): the prefill left in the decode pool.
    pub mean_decode_computed_tokens: f64,
}

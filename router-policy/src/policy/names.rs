//! The policy names, apart so that [`crate::error`] can list them without depending on the
//! policies.

/// Every policy name accepted by
/// [`PolicyConfig::from_name`](super::PolicyConfig::from_name), default first.
pub const POLICY_NAMES: &[&str] = &[
    "warm",
    "round_robin",
    "random",
    "least_loaded",
    "consistent_hash",
    "cache_aware",
    "kv_cost",
];

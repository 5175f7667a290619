//! The one error type of this crate's public surface.

use thiserror::Error;
use warmpath_core::ids::CheckpointId;

/// Everything routing and policy configuration can fail with.
#[derive(Clone, Debug, PartialEq, Eq, Error)]
pub enum RouteError {
    /// No replica is healthy and serving the requested checkpoint.
    #[error("no eligible replica for checkpoint {checkpoint} ({known} replicas known)")]
    NoEligibleReplica {
        /// The checkpoint the request asked for.
        checkpoint: CheckpointId,
        /// How many replicas the cluster view held.
        known: usize,
    },
    /// A policy name that [`crate::policy::names::POLICY_NAMES`] does not list.
    #[error("unknown routing policy {0:?}; known: {names}", names = crate::policy::names::POLICY_NAMES.join(", "))]
    UnknownPolicy(String),
    /// A configuration value out of range.
    #[error("invalid config {key}: {reason}")]
    InvalidConfig {
        /// Dotted path of the offending key, e.g. `warm.spread_queue_gap_ms`.
        key: &'static str,
        /// What is wrong with it.
        reason: String,
    },
}

impl RouteError {
    /// Shorthand for [`RouteError::InvalidConfig`].
    pub(crate) fn invalid(key: &'static str, reason: impl Into<String>) -> Self {
        Self::InvalidConfig {
            key,
            reason: reason.into(),
        }
    }
}

//! The flow queue's vocabulary: tenants, classes, entries, tickets, refusals, config.

use super::cost::Cost;
use crate::error::RouteError;
use serde::{Deserialize, Serialize};
use std::fmt;
use warmpath_core::Millis;

/// A tenant as the flow queue knows it: a small dense index the caller assigns (the
/// gateway numbers its configured tenants), below [`FlowConfig::max_tenants`].
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize,
)]
#[serde(transparent)]
pub struct FlowTenant(pub u32);

/// A priority class. A bounded set, highest first: a higher class is dispatched first,
/// a lower one ages into precedence after [`FlowConfig::aging_ms`].
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize,
)]
#[serde(rename_all = "lowercase")]
pub enum Class {
    /// Latency-sensitive: dispatched first, shed at once when its deadline cannot be met.
    #[default]
    Interactive,
    /// Throughput work: dispatched when no interactive request waits (or once aged);
    /// never shed for a deadline.
    Batch,
}

impl Class {
    /// Every class, highest priority first.
    pub const ALL: [Class; 2] = [Class::Interactive, Class::Batch];

    /// Position in [`Class::ALL`].
    pub fn index(self) -> usize {
        self as usize
    }

    /// The lowercase name (config, headers, metrics labels).
    pub fn as_str(self) -> &'static str {
        match self {
            Class::Interactive => "interactive",
            Class::Batch => "batch",
        }
    }

    /// Parses a name: the class names, and OpenAI's `priority` values that map to one
    /// (`auto`/`default`/`priority` are interactive, `flex` is batch).
    pub fn parse(s: &str) -> Option<Class> {
        match s.trim().to_ascii_lowercase().as_str() {
            "interactive" | "default" | "auto" | "priority" | "high" => Some(Class::Interactive),
            "batch" | "flex" | "low" => Some(Class::Batch),
            _ => None,
        }
    }
}

impl fmt::Display for Class {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A request asking to wait.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Entry {
    /// Whose request.
    pub tenant: FlowTenant,
    /// Its class.
    pub class: Class,
    /// Its predicted prefill work ([`super::prefill_cost`]).
    pub cost: Cost,
    /// When it arrived (the caller's clock).
    pub arrival: Millis,
    /// When its first token is due (its TTFT objective), if it has one.
    pub deadline: Option<Millis>,
    /// The predicted time to first token on the best replica for it, once it is sent.
    pub predicted_ttft: Millis,
}

impl Entry {
    /// Whether it can still meet its deadline if it is sent at `now`.
    pub fn can_meet(&self, now: Millis) -> bool {
        self.deadline
            .is_none_or(|d| now.0.saturating_add(self.predicted_ttft.0) <= d.0)
    }
}

/// A waiting request's handle: what `pop` returns and `remove` takes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Ticket {
    pub(crate) seq: u64,
    pub(crate) tenant: FlowTenant,
    pub(crate) class: Class,
}

impl Ticket {
    /// Push order (unique per queue).
    pub fn seq(self) -> u64 {
        self.seq
    }
    /// Whose request.
    pub fn tenant(self) -> FlowTenant {
        self.tenant
    }
    /// Its class.
    pub fn class(self) -> Class {
        self.class
    }
}

/// Why `push` refused a request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Refusal {
    /// The tenant's own queue is full (its bound): the tenant should slow down (429).
    TenantFull {
        /// The tenant's bound.
        limit: u32,
    },
    /// The queue is full for everyone (503).
    QueueFull {
        /// The gateway-wide bound.
        limit: u32,
    },
    /// An interactive request whose deadline no replica can meet by the prediction.
    Deadline {
        /// The predicted TTFT.
        predicted: Millis,
        /// The time left to its deadline at arrival.
        objective: Millis,
    },
    /// A tenant index at or above [`FlowConfig::max_tenants`].
    UnknownTenant,
}

/// Bounds and knobs of a [`super::FlowQueue`].
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct FlowConfig {
    /// Requests waiting, all tenants together.
    pub max_queued: u32,
    /// Requests one tenant may have waiting (a tenant's own setting overrides it).
    pub max_queued_per_tenant: u32,
    /// How long a batch request waits before it goes ahead of everything not aged.
    pub aging_ms: u64,
    /// Cached prompt tokens' share of a computed token's cost (0 to 1).
    pub cached_cost_fraction: f64,
    /// Tenants the queue keeps state for.
    pub max_tenants: u32,
}

impl Default for FlowConfig {
    fn default() -> Self {
        Self {
            max_queued: 256,
            max_queued_per_tenant: 64,
            aging_ms: 5000,
            cached_cost_fraction: 0.1,
            max_tenants: 1024,
        }
    }
}

impl FlowConfig {
    /// Checks ranges.
    pub fn validate(&self) -> Result<(), RouteError> {
        if self.max_queued_per_tenant == 0 {
            return Err(RouteError::invalid(
                "flow.max_queued_per_tenant",
                "must be at least 1",
            ));
        }
        if self.max_tenants == 0 || self.max_tenants > 1 << 20 {
            return Err(RouteError::invalid(
                "flow.max_tenants",
                "must be 1 to 1048576",
            ));
        }
        if !(0.0..=1.0).contains(&self.cached_cost_fraction) {
            return Err(RouteError::invalid(
                "flow.cached_cost_fraction",
                "must be between 0 and 1",
            ));
        }
        Ok(())
    }
}

/// Counters since the queue was built.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FlowStats {
    /// Waiting now.
    pub queued: u32,
    /// Waiting now, per class ([`Class::index`]).
    pub queued_by_class: [u32; 2],
    /// Accepted by `push`.
    pub pushed: u64,
    /// Returned by `pop`.
    pub dispatched: u64,
    /// Batch requests dispatched because they had aged.
    pub aged: u64,
    /// Dropped by `pop` because their deadline could no longer be met.
    pub expired: u64,
    /// Taken out by `remove`.
    pub removed: u64,
    /// Refused: the tenant's queue was full.
    pub refused_tenant: u64,
    /// Refused: the queue was full.
    pub refused_full: u64,
    /// Refused: the deadline could not be met.
    pub refused_deadline: u64,
}

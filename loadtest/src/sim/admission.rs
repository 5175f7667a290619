//! The gateway's admission in front of the simulated replicas: tenants, priority classes
//! and TTFT objectives on the requests, a cap on requests in flight, and who waits and who
//! goes next when the cap is reached.
//!
//! Two modes:
//! - [`AdmissionMode::Fcfs`]: the gateway as it was before issue 42 (`proxy/route.rs::
//!   hold_slot`): one first-come queue of at most `max_queue` requests, each refused (503)
//!   once it has waited `queue_timeout_ms`;
//! - [`AdmissionMode::Flow`]: `router_policy::flow` (the gateway's flow control, one
//!   implementation): per-tenant weighted fair queues by predicted prefill cost, classes
//!   with aging, and deadlines: an interactive request whose predicted TTFT (the routing
//!   decision's cost of the chosen replica: `warm`'s prediction, queue included) cannot
//!   meet its objective is shed at once, on arrival or when its turn comes.

use router_policy::flow::{Class, FlowConfig, FlowTenant};
use std::collections::VecDeque;

/// How the simulated gateway admits requests.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AdmissionMode {
    /// One first-come queue, bounded, with a wait timeout.
    Fcfs,
    /// `router_policy::flow`: fair per tenant, classes, deadline shedding.
    Flow,
}

impl AdmissionMode {
    /// `fcfs` or `flow`.
    pub fn as_str(self) -> &'static str {
        match self {
            AdmissionMode::Fcfs => "fcfs",
            AdmissionMode::Flow => "flow",
        }
    }
}

/// The admission part of a run.
#[derive(Clone, Debug)]
pub struct AdmissionSim {
    /// The mode.
    pub mode: AdmissionMode,
    /// Requests in flight per replica (the gateway's `admission.max_in_flight_per_replica`).
    pub slots_per_replica: u32,
    /// FCFS: requests allowed to wait (`admission.max_queue`).
    pub max_queue: u32,
    /// FCFS: how long a request may wait for a slot before 503 (`admission.queue_timeout_ms`).
    pub queue_timeout_ms: f64,
    /// Flow: the queue's bounds and knobs.
    pub flow: FlowConfig,
    /// Flow: slots per replica past the cap for a request that outranks the work in flight
    /// (the gateway's `admission.flow.reserve_per_replica`; pooled over the replicas).
    pub reserve_per_replica: u32,
    /// Tenant weights, one per tenant (tenant `t` sends the requests of groups `g` with
    /// `g % tenants == t`).
    pub weights: Vec<u32>,
    /// Class of every request, in request order.
    pub classes: Vec<Class>,
    /// TTFT objective of every request, ms (none: no deadline, always met).
    pub ttft_objective_ms: Option<f64>,
}

impl AdmissionSim {
    /// Number of tenants.
    pub fn tenants(&self) -> u32 {
        u32::try_from(self.weights.len().max(1)).unwrap_or(u32::MAX)
    }

    /// The tenant of a request of `group`.
    pub fn tenant_of(&self, group: u64) -> FlowTenant {
        FlowTenant((group % u64::from(self.tenants())) as u32)
    }

    /// The class of request `i` (interactive when not listed).
    pub fn class_of(&self, i: usize) -> Class {
        self.classes.get(i).copied().unwrap_or_default()
    }

    /// Whether a request with TTFT `ttft_ms` met its objective.
    pub fn met(&self, ttft_ms: f64) -> bool {
        self.ttft_objective_ms.is_none_or(|o| ttft_ms <= o)
    }
}

/// Requests waiting at the simulated gateway.
#[derive(Debug)]
pub(crate) enum GatewayQueue {
    /// First come, first served: (request, arrival ms).
    Fcfs(VecDeque<(usize, f64)>),
    /// The flow queue, and the request behind each ticket (by push order).
    Flow(
        Box<router_policy::flow::FlowQueue>,
        std::collections::HashMap<u64, usize>,
    ),
}

impl GatewayQueue {
    /// An empty queue for `a`'s mode, with its tenants' weights set.
    pub(crate) fn new(a: &AdmissionSim) -> Self {
        match a.mode {
            AdmissionMode::Fcfs => GatewayQueue::Fcfs(VecDeque::new()),
            AdmissionMode::Flow => {
                let mut q = router_policy::flow::FlowQueue::new(a.flow.clone());
                for (t, &w) in a.weights.iter().enumerate() {
                    q.set_tenant(FlowTenant(t as u32), w, None);
                }
                GatewayQueue::Flow(Box::new(q), Default::default())
            }
        }
    }

    /// Whether nothing waits.
    pub(crate) fn is_empty(&self) -> bool {
        match self {
            GatewayQueue::Fcfs(q) => q.is_empty(),
            GatewayQueue::Flow(q, _) => q.is_empty(),
        }
    }
}

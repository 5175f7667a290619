//! Flow control at the gateway (issue 42): when every replica slot a request could use is
//! taken, the request waits in its tenant's queue instead of one first-come queue, and
//! the pure [`router_policy::flow::FlowQueue`] decides who goes next when a slot frees:
//! aged batch requests, then the higher class, then tenants by weight over predicted
//! prefill cost (uncached prompt tokens, cached ones at `admission.flow.cached_token_cost`).
//!
//! # Layout
//! - [`request`]: a request's class and TTFT objective, from `x-priority`,
//!   `x-slo-ttft-ms` and the tenant's `flow:` defaults; goodput at the first body byte.
//! - [`gate`]: the queues (one per model, so a model with free replicas never waits
//!   behind another's) and the requests parked in them; the data plane's
//!   `proxy::flow_wait` pushes, waits and hands out slots.
//!
//! The fast path (a free slot and nothing waiting) reads one atomic, and takes the gate's
//! lock once to count the request in flight (its [`gate::Hold`]) and once when it ends.
//! Fairness is per gateway: in a fleet every gateway has the same weights and orders its
//! own waiters; the shares hold per gateway, not across the fleet.

pub(crate) mod gate;
pub(crate) mod request;

pub(crate) use gate::FlowGate;
pub(crate) use request::FlowRequest;

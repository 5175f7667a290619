//! Flow control: who waits and who goes next when every replica slot is taken.
//!
//! A pure queue (no clock, no runtime): the caller passes the time ([`Millis`]) and each
//! request's predicted prefill work, and asks [`FlowQueue::pop`] who goes next whenever a
//! replica slot frees. The gateway and the simulator (`loadtest simulate`) drive the same
//! type, so they take the same decisions from the same inputs.
//!
//! # Rules, in the order `pop` applies them
//! 1. **Aging** (no starvation): a [`Class::Batch`] request that has waited at least
//!    [`FlowConfig::aging_ms`] goes before every request that has not aged, except right
//!    after another aged dispatch (then the next goes by the rules below); aged requests
//!    go oldest first. So a batch request waits at most `aging_ms`, plus two dispatches
//!    for each aged request ahead of it; and under sustained overload, when every batch
//!    head has aged, interactive work still gets every other slot instead of waiting
//!    behind the whole aged backlog (priority is never inverted).
//! 2. **Priority**: otherwise the highest class with anything waiting goes first
//!    ([`Class::Interactive`] before [`Class::Batch`]).
//! 3. **Weighted fair sharing** within a class: start-time fair queuing over tenants.
//!    Each (tenant, class) flow keeps a virtual time, advanced by `cost / weight` at each
//!    dispatch; the backlogged flow with the smallest virtual time goes, and a flow that
//!    was idle starts at the class's current virtual time (no saved-up credit). Over any
//!    interval in which two tenants stay backlogged, their served cost divided by their
//!    weight differs by at most `max_cost_i / w_i + max_cost_j / w_j` (the SFQ bound,
//!    checked by the property tests).
//! 4. **Deadlines**: a request may carry a deadline (its TTFT objective) and the
//!    predicted TTFT of the best replica for it. An interactive request that cannot
//!    meet it is refused at [`FlowQueue::push`] ([`Refusal::Deadline`]) or, when the
//!    deadline passes while it waits, dropped by `pop` and reported by
//!    [`FlowQueue::take_expired`]. A batch request is never shed for its deadline: it
//!    waits and simply does not count as goodput.
//!
//! The cost of a request is its predicted prefill work ([`prefill_cost`]): uncached
//! prompt tokens, plus cached ones at a configured fraction, as the `warm` policy
//! predicts the cache.
//!
//! 5. **Reserve** (past the queue): a request that outranks work already in flight (an
//!    interactive one while batch runs, or a tenant below its weighted share of the
//!    requests in flight) may take one of a few slots past a full replica's cap
//!    ([`InFlight::outranks`]), since a running request is never taken back.
//!
//! # Memory
//! At most [`FlowConfig::max_tenants`] tenants, each with at most its queue bound of
//! waiting requests, and at most [`FlowConfig::max_queued`] waiting in all.

mod cost;
mod inflight;
mod queue;
#[cfg(test)]
mod tests;
mod types;

pub use cost::{prefill_cost, Cost};
pub use inflight::InFlight;
pub use queue::FlowQueue;
pub use types::{Class, Entry, FlowConfig, FlowStats, FlowTenant, Refusal, Ticket};

//! The data plane's side of flow control (`crate::flow`): a request that finds no free
//! slot (or others waiting) parks in its model's flow queue with its try order and waits
//! for a grant; [`dispatch`] hands freed slots to the requests whose turn it is; a waiter
//! that goes away takes its entry out on drop.

use crate::error::GatewayError;
use crate::flow::gate::{Grant, Hold, Inner, ModelQueue, Waiter};
use crate::flow::FlowRequest;
use crate::replicas::order::TryOrder;
use crate::replicas::Slot;
use crate::state::AppState;
use crate::tenants::Tenant;
use parking_lot::Mutex;
use router_policy::flow::{
    Class, Cost, Entry, FlowConfig, FlowQueue, FlowTenant, InFlight, Refusal, Ticket,
};
use std::collections::HashMap;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::oneshot;
use warmpath_core::Millis;

/// A request asking to wait, as the route phase knows it.
pub(crate) struct Ask<'a> {
    /// Its tenant.
    pub tenant: &'a Tenant,
    /// Its model (the queue it waits in).
    pub model: &'a Arc<str>,
    /// Class and objective.
    pub flow: &'a FlowRequest,
    /// Predicted prefill work.
    pub cost: Cost,
    /// Predicted TTFT once sent (the `warm` prediction; 0 when the policy has none).
    pub predicted_ttft_ms: u64,
    /// When the policy decided (the request's arrival at admission).
    pub decided: Instant,
}

/// Waits in `ask.model`'s flow queue for a slot on `order`'s replicas; `order` comes
/// back with the slot, and the request's [`Hold`] on its place in flight. Errors: the tenant's queue is full (429), the queue is full
/// (503), the objective cannot be met at arrival or is used up by the wait (503), or
/// the wait exceeds `admission.queue_timeout_ms` (503).
pub(crate) async fn wait(
    state: &AppState,
    order: &mut TryOrder,
    ask: Ask<'_>,
) -> Result<(Slot, Hold), GatewayError> {
    let cfg = state.config();
    let arrival = state.millis_at(ask.decided);
    let objective = ask.flow.objective_ms;
    let entry = Entry {
        tenant: FlowTenant(0),
        class: ask.flow.class,
        cost: ask.cost,
        arrival,
        deadline: objective.map(|o| Millis(arrival.0 + o)),
        predicted_ttft: Millis(ask.predicted_ttft_ms),
    };
    let (tx, mut rx) = oneshot::channel();
    let ticket = {
        let mut inner = state.flow.inner.lock();
        if state.queued.load(Ordering::Acquire) >= cfg.admission.max_queue {
            return Err(shed(state, &ask, "queue_full", overloaded()));
        }
        let tenant = inner.tenant(&ask.tenant.id);
        let mq = inner
            .queues
            .entry(ask.model.clone())
            .or_insert_with(|| ModelQueue {
                queue: FlowQueue::new(flow_config(&cfg.admission)),
                waiters: HashMap::new(),
            });
        if mq.queue.is_empty() && *mq.queue.config() != flow_config(&cfg.admission) {
            // A reload changed the knobs: nothing waits, so start over with them.
            mq.queue = FlowQueue::new(flow_config(&cfg.admission));
        }
        mq.queue
            .set_tenant(tenant, ask.tenant.flow.weight, ask.tenant.flow.max_queued);
        let ticket = match mq.queue.push(Entry { tenant, ..entry }) {
            Ok(t) => t,
            Err(r) => return Err(refused(state, &ask, r)),
        };
        mq.waiters.insert(
            ticket.seq(),
            Waiter {
                order: std::mem::take(order),
                tx,
            },
        );
        state.queued.fetch_add(1, Ordering::AcqRel);
        state.metrics.queued.inc();
        ticket
    };
    let mut guard = Parked {
        state,
        model: ask.model,
        ticket: Some(ticket),
    };
    // The latest moment it can still be sent: its objective less the prediction
    // (interactive only; batch waits), or the queue timeout.
    let timeout = ask.decided + Duration::from_millis(cfg.admission.queue_timeout_ms);
    let latest = match (objective, ask.flow.class) {
        (Some(o), Class::Interactive) => {
            let slack = o.saturating_sub(ask.predicted_ttft_ms);
            (ask.decided + Duration::from_millis(slack)).min(timeout)
        }
        _ => timeout,
    };
    dispatch(state);
    loop {
        tokio::select! {
            biased;
            grant = &mut rx => {
                guard.ticket = None;
                return match grant {
                    Ok(Grant::Slot(slot, o, hold)) => {
                        *order = o;
                        let waited = ask.decided.elapsed();
                        state
                            .metrics
                            .flow
                            .queue_seconds
                            .with_label_values(&[&ask.tenant.id, ask.flow.class.as_str()])
                            .observe(waited.as_secs_f64());
                        Ok((slot, hold))
                    }
                    Ok(Grant::Expired) | Err(_) => Err(expired(state, &ask)),
                };
            }
            _ = tokio::time::sleep_until(latest.into()) => {
                if guard.cancel() {
                    return Err(if latest < timeout {
                        expired(state, &ask)
                    } else {
                        shed(state, &ask, "timeout", overloaded())
                    });
                }
                // Dispatched in the meantime: the grant is in the channel.
            }
            _ = state.registry.wait_for_free_slot(Duration::from_millis(50)) => {
                dispatch(state);
            }
        }
    }
}

/// Hands free slots to the requests whose turn it is, in every model's queue. When the
/// head finds every replica of its try order at the cap, the next interactive request of
/// a tenant that outranks the work in flight
/// ([`router_policy::flow::InFlight::outranks`]) takes a reserve slot; batch never does.
pub(crate) fn dispatch(state: &AppState) {
    let admission = &state.config().admission;
    let max = admission.max_in_flight_per_replica;
    let reserve = admission.flow.reserve_per_replica;
    let now = Instant::now();
    let at = state.millis_at(now);
    let gate = &state.flow.inner;
    let mut guard = gate.lock();
    let inner: &mut Inner = &mut guard;
    let Inner { queues, held, .. } = inner;
    queues.retain(|model, mq| {
        while let Some(next) = mq.queue.peek(at) {
            expire(state, mq);
            let Some(w) = mq.waiters.get_mut(&next.seq()) else {
                mq.queue.remove(next);
                continue;
            };
            if let Some(slot) = w.order.next_replica(&state.registry, max, now) {
                let popped = mq.queue.pop(at);
                debug_assert_eq!(popped, Some(next));
                grant(state, (gate, held), (model, mq), next, slot);
                continue;
            }
            // Every replica of the head's try order is at the cap. The next interactive
            // request of a tenant that outranks the work in flight may still go, to a
            // reserve slot.
            if reserve == 0 {
                break;
            }
            let in_flight = held.get(model);
            let outranks = |t: FlowTenant, weight: u32| {
                in_flight.is_some_and(|f| f.outranks(t, weight, Class::Interactive))
            };
            let Some(cand) = mq.queue.peek_in(at, Class::Interactive, &outranks) else {
                break;
            };
            expire(state, mq);
            let Some(w) = mq.waiters.get_mut(&cand.seq()) else {
                mq.queue.remove(cand);
                continue;
            };
            let Some(slot) = w.order.next_replica(&state.registry, max + reserve, now) else {
                break;
            };
            let popped = mq.queue.pop_in(at, Class::Interactive, &outranks);
            debug_assert_eq!(popped, Some(cand));
            grant(state, (gate, held), (model, mq), cand, slot);
        }
        expire(state, mq);
        !mq.queue.is_empty()
    });
}

/// Sends the requests the queue dropped for their deadline their refusal.
fn expire(state: &AppState, mq: &mut ModelQueue) {
    for gone in mq.queue.take_expired() {
        if let Some(w) = mq.waiters.remove(&gone.seq()) {
            left(state);
            let _ = w.tx.send(Grant::Expired);
        }
    }
}

/// Hands `slot` to the waiter of `ticket` (just popped) and counts it in flight.
fn grant(
    state: &AppState,
    (gate, held): (&Arc<Mutex<Inner>>, &mut HashMap<Arc<str>, InFlight>),
    (model, mq): (&Arc<str>, &mut ModelQueue),
    ticket: Ticket,
    slot: Slot,
) {
    let Some(w) = mq.waiters.remove(&ticket.seq()) else {
        return;
    };
    left(state);
    let weight = mq.queue.weight(ticket.tenant());
    held.entry(model.clone())
        .or_default()
        .start(ticket.tenant(), weight, ticket.class());
    let hold = Hold::new(gate, model, ticket.tenant(), ticket.class());
    if let Err(Grant::Slot(_, _, hold)) = w.tx.send(Grant::Slot(slot, w.order, hold)) {
        // Its waiter is gone: the lock is held here, so not the hold's drop.
        hold.release_in(held);
    }
}

/// A request left the queue (dispatched, expired or cancelled).
fn left(state: &AppState) {
    state.queued.fetch_sub(1, Ordering::AcqRel);
    state.metrics.queued.dec();
}

/// Takes a waiter's entry out when it stops waiting without a grant.
struct Parked<'a> {
    state: &'a AppState,
    model: &'a Arc<str>,
    ticket: Option<Ticket>,
}

impl Parked<'_> {
    /// Takes the entry out; false when it was dispatched (or expired) first.
    fn cancel(&mut self) -> bool {
        let Some(ticket) = self.ticket.take() else {
            return false;
        };
        let mut inner = self.state.flow.inner.lock();
        let Some(mq) = inner.queues.get_mut(self.model) else {
            return false;
        };
        if !mq.queue.remove(ticket) {
            return false;
        }
        mq.waiters.remove(&ticket.seq());
        left(self.state);
        true
    }
}

impl Drop for Parked<'_> {
    fn drop(&mut self) {
        self.cancel();
    }
}

/// The pure queue's config from the gateway's.
fn flow_config(a: &crate::config::AdmissionConfig) -> FlowConfig {
    FlowConfig {
        max_queued: a.max_queue,
        max_queued_per_tenant: a.flow.max_queued_per_tenant,
        aging_ms: a.flow.batch_aging_ms,
        cached_cost_fraction: a.flow.cached_token_cost,
        ..FlowConfig::default()
    }
}

fn overloaded() -> GatewayError {
    GatewayError::Overloaded {
        retry_after: Duration::from_secs(1),
    }
}

/// Counts a shed request and returns its error.
fn shed(state: &AppState, ask: &Ask<'_>, reason: &str, e: GatewayError) -> GatewayError {
    state
        .metrics
        .flow
        .shed
        .with_label_values(&[&ask.tenant.id, ask.flow.class.as_str(), reason])
        .inc();
    state.metrics.shed.inc();
    tracing::debug!(tenant = %ask.tenant.id, class = %ask.flow.class, reason, "flow: shed");
    e
}

fn refused(state: &AppState, ask: &Ask<'_>, r: Refusal) -> GatewayError {
    match r {
        Refusal::TenantFull { limit } => shed(
            state,
            ask,
            "tenant_queue_full",
            GatewayError::TenantQueueFull {
                limit,
                retry_after: Duration::from_secs(1),
            },
        ),
        Refusal::QueueFull { .. } | Refusal::UnknownTenant => {
            shed(state, ask, "queue_full", overloaded())
        }
        Refusal::Deadline {
            predicted,
            objective,
        } => shed(
            state,
            ask,
            "deadline",
            GatewayError::DeadlineUnmeetable {
                objective_ms: objective.0,
                predicted_ms: predicted.0,
            },
        ),
    }
}

/// Sheds an interactive request whose objective the prediction already misses.
pub(crate) fn unmeetable(state: &AppState, ask: &Ask<'_>) -> GatewayError {
    refused(
        state,
        ask,
        Refusal::Deadline {
            predicted: Millis(ask.predicted_ttft_ms),
            objective: Millis(ask.flow.objective_ms.unwrap_or(0)),
        },
    )
}

fn expired(state: &AppState, ask: &Ask<'_>) -> GatewayError {
    let waited = ask.decided.elapsed().as_millis() as u64;
    shed(
        state,
        ask,
        "deadline_expired",
        GatewayError::DeadlineUnmeetable {
            objective_ms: ask.flow.objective_ms.unwrap_or(0),
            predicted_ms: waited + ask.predicted_ttft_ms,
        },
    )
}

//! The gateway's flow queues: one [`FlowQueue`] per model and the requests parked in it.
//! The data plane (`proxy::flow_wait`) pushes, waits and dispatches.
//!
//! A request that finds no free slot (or finds others already waiting) pushes an entry
//! into its model's [`FlowQueue`] and parks its [`TryOrder`] with the gate. Whenever a
//! slot frees (or a request arrives or its timer fires), `proxy::flow_wait::dispatch` asks each
//! queue who goes next, takes a slot on that request's replicas, and sends both to it. A
//! head whose replicas are all busy waits for the next free slot (its queue's order is
//! the policy's, not first-come). A waiter that goes away (client gone, timeout) takes its
//! entry out on drop; a slot already sent to it is released with the channel.
//!
//! Every request that got a slot holds a [`Hold`] until it ends: the model's
//! [`InFlight`] counts it by tenant and class, which is what lets a request that outranks
//! the work in flight past a full replica (`admission.flow.reserve_per_replica`).

use crate::replicas::order::TryOrder;
use crate::replicas::Slot;
use parking_lot::Mutex;
use router_policy::flow::{Class, FlowQueue, FlowTenant, InFlight};
use std::collections::HashMap;
use std::sync::Arc;
use tokio::sync::oneshot;

/// What a waiter gets.
pub(crate) enum Grant {
    /// A slot, the try order it was taken from, and the request's place in flight.
    Slot(Slot, TryOrder, Hold),
    /// Its deadline passed while it waited.
    Expired,
}

/// One parked request.
pub(crate) struct Waiter {
    /// Its try order, given back with the slot.
    pub order: TryOrder,
    /// Where its grant goes.
    pub tx: oneshot::Sender<Grant>,
}

/// One model's queue and its parked requests by ticket sequence.
pub(crate) struct ModelQueue {
    /// The pure queue.
    pub queue: FlowQueue,
    /// Parked requests by ticket sequence.
    pub waiters: HashMap<u64, Waiter>,
}

/// The queues and the tenants' flow indexes.
#[derive(Default)]
pub(crate) struct Inner {
    /// One queue per model.
    pub queues: HashMap<Arc<str>, ModelQueue>,
    /// Tenant ids to the queue's dense indexes.
    pub tenants: HashMap<Arc<str>, FlowTenant>,
    /// Requests in flight per model (models with none are dropped).
    pub held: HashMap<Arc<str>, InFlight>,
}

impl Inner {
    /// `tenant`'s dense index (assigned on first sight; tenants are configured, so few).
    pub(crate) fn tenant(&mut self, id: &Arc<str>) -> FlowTenant {
        let next = self.tenants.len() as u32;
        *self.tenants.entry(id.clone()).or_insert(FlowTenant(next))
    }
}

/// The flow queues of this gateway.
#[derive(Default)]
pub(crate) struct FlowGate {
    /// Everything, behind one lock (taken when requests wait, and once as each request
    /// starts and ends).
    pub inner: Arc<Mutex<Inner>>,
}

impl FlowGate {
    /// Counts a request of `tenant` (weight `weight`) in `class` in flight on `model`'s
    /// replicas until the returned hold drops.
    pub(crate) fn hold(
        &self,
        model: &Arc<str>,
        tenant: &Arc<str>,
        weight: u32,
        class: Class,
    ) -> Hold {
        let mut inner = self.inner.lock();
        let t = inner.tenant(tenant);
        inner
            .held
            .entry(model.clone())
            .or_default()
            .start(t, weight, class);
        Hold::new(&self.inner, model, t, class)
    }
}

/// A request's place among its model's requests in flight; released on drop.
pub(crate) struct Hold {
    gate: Arc<Mutex<Inner>>,
    model: Arc<str>,
    tenant: FlowTenant,
    class: Class,
    armed: bool,
}

impl Hold {
    /// The hold of a request already counted in `gate`'s [`Inner::held`] under `model`.
    pub(crate) fn new(
        gate: &Arc<Mutex<Inner>>,
        model: &Arc<str>,
        tenant: FlowTenant,
        class: Class,
    ) -> Self {
        Self {
            gate: gate.clone(),
            model: model.clone(),
            tenant,
            class,
            armed: true,
        }
    }

    /// Releases it while the caller holds the gate's lock (`held` is its [`Inner::held`]);
    /// the drop then does nothing.
    pub(crate) fn release_in(mut self, held: &mut HashMap<Arc<str>, InFlight>) {
        self.armed = false;
        finish(held, &self.model, self.tenant, self.class);
    }
}

fn finish(
    held: &mut HashMap<Arc<str>, InFlight>,
    model: &Arc<str>,
    tenant: FlowTenant,
    class: Class,
) {
    if let Some(f) = held.get_mut(model) {
        f.finish(tenant, class);
        if f.is_empty() {
            held.remove(model);
        }
    }
}

impl std::fmt::Debug for Hold {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Hold")
            .field("model", &self.model)
            .field("tenant", &self.tenant)
            .field("class", &self.class)
            .finish()
    }
}

impl Drop for Hold {
    fn drop(&mut self) {
        if self.armed {
            let mut inner = self.gate.lock();
            finish(&mut inner.held, &self.model, self.tenant, self.class);
        }
    }
}

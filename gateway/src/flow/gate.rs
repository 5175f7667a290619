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

use crate::replicas::order::TryOrder;
use crate::replicas::Slot;
use parking_lot::Mutex;
use router_policy::flow::{FlowQueue, FlowTenant};
use std::collections::HashMap;
use std::sync::Arc;
use tokio::sync::oneshot;

/// What a waiter gets.
pub(crate) enum Grant {
    /// A slot and the try order it was taken from.
    Slot(Slot, TryOrder),
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
}

/// The flow queues of this gateway.
#[derive(Default)]
pub(crate) struct FlowGate {
    /// Everything, behind one lock (taken only when requests wait).
    pub inner: Mutex<Inner>,
}

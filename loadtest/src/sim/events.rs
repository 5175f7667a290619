//! The simulator's event queue: a min-heap on (time, insertion order), so equal-time events
//! run in the order they were scheduled and runs are deterministic.

use super::replica::Seq;
use std::cmp::Ordering;
use std::collections::BinaryHeap;
use std::sync::Arc;
use warmpath_core::{BlockHash, KvStreamMessage, Millis, ReplicaId};

/// Which gateways a delivery is for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Deliver {
    /// Every gateway (same delay for all).
    All,
    /// One gateway (regions: the delay includes half the round trip).
    One(usize),
}

/// Something that happens at a point in virtual time.
#[derive(Debug)]
pub(crate) enum Event {
    /// Request `usize` reaches the router.
    Arrival(usize),
    /// A replica's step ends.
    StepEnd(ReplicaId),
    /// A KV event message reaches the router.
    KvDelivery(ReplicaId, Arc<KvStreamMessage>, Deliver),
    /// The rollout starts: the new checkpoint's replicas join.
    RolloutStart,
    /// Replicas report their load.
    LoadReport,
    /// Split request `usize`'s KV has reached its decode replica.
    TransferDone(usize),
    /// Another gateway's routing decision (replica, block hashes, when it was made) reaches
    /// gateway `usize` through the shared routing history.
    HistoryDelivery(usize, ReplicaId, Arc<[BlockHash]>, Millis),
    /// A sequence's shared-tier lookup at a replica is done: its blocks `from..upto` came
    /// from the tier (none when `from == upto`); it joins the replica's queue.
    TierLoaded(ReplicaId, Box<Seq>, usize, usize),
}

#[derive(Debug)]
struct Entry {
    at: f64,
    order: u64,
    event: Event,
}

impl PartialEq for Entry {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}
impl Eq for Entry {}
impl PartialOrd for Entry {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Entry {
    fn cmp(&self, other: &Self) -> Ordering {
        // Reversed: BinaryHeap is a max-heap, we pop the earliest.
        other
            .at
            .total_cmp(&self.at)
            .then_with(|| other.order.cmp(&self.order))
    }
}

/// Min-heap of events.
#[derive(Debug, Default)]
pub(crate) struct EventQueue {
    heap: BinaryHeap<Entry>,
    next: u64,
}

impl EventQueue {
    /// Schedules `event` at `at` ms.
    pub(super) fn push(&mut self, at: f64, event: Event) {
        self.heap.push(Entry {
            at,
            order: self.next,
            event,
        });
        self.next += 1;
    }

    /// The earliest event.
    pub(super) fn pop(&mut self) -> Option<(f64, Event)> {
        self.heap.pop().map(|e| (e.at, e.event))
    }

    /// Events pending.
    pub(super) fn len(&self) -> usize {
        self.heap.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pops_in_time_then_insertion_order() {
        let mut q = EventQueue::default();
        q.push(5.0, Event::Arrival(0));
        q.push(1.0, Event::Arrival(1));
        q.push(5.0, Event::Arrival(2));
        q.push(0.5, Event::LoadReport);
        let order: Vec<String> = std::iter::from_fn(|| q.pop())
            .map(|(t, e)| format!("{t}:{e:?}"))
            .collect();
        assert_eq!(
            order,
            vec![
                "0.5:LoadReport",
                "1:Arrival(1)",
                "5:Arrival(0)",
                "5:Arrival(2)"
            ]
        );
        assert_eq!(q.len(), 0);
    }
}

//! [`TryOrder`]: the replicas a request may be sent to, in the order to try them, and the
//! slot each attempt takes (moved here from `proxy::route` so that the flow queues, below
//! the data plane, can park a request's order).

use super::{Registry, Replica, Slot};
use std::sync::Arc;
use std::time::Instant;

/// The replicas a request may be sent to, in the order to try them (the policy's choice,
/// then its fallbacks), and how many have been tried.
#[derive(Debug, Default)]
pub(crate) struct TryOrder {
    replicas: Vec<Arc<Replica>>,
    tried: usize,
}

impl TryOrder {
    /// `replicas` in try order, none tried yet.
    pub(crate) fn new(replicas: Vec<Arc<Replica>>) -> Self {
        Self { replicas, tried: 0 }
    }

    /// Puts `replica` first (a conversation's pin: `super::responses::pin`), before any
    /// attempt.
    pub(crate) fn prefer(&mut self, replica: Arc<Replica>) {
        self.replicas.retain(|r| r.id != replica.id);
        self.replicas.insert(0, replica);
    }

    /// The replicas not yet tried, in order (the EPP's fallback endpoints).
    pub(crate) fn untried(&self) -> &[Arc<Replica>] {
        &self.replicas[self.tried..]
    }

    /// Whether every replica has been tried.
    pub(crate) fn done(&self) -> bool {
        self.tried >= self.replicas.len()
    }

    /// The replica for the next attempt: the first one not yet tried that is healthy (or
    /// half-open) at `now` and has a free in-flight slot (below `max`). It moves up to
    /// the tried ones; the ones it passed stay untried for a later attempt. `None` when
    /// no untried replica has room.
    pub(crate) fn next_replica(
        &mut self,
        registry: &Registry,
        max: u32,
        now: Instant,
    ) -> Option<Slot> {
        let (i, slot) = self.replicas[self.tried..]
            .iter()
            .enumerate()
            .filter(|(_, r)| r.health.lock().routable(now))
            .find_map(|(i, r)| registry.try_acquire(r, max).map(|s| (self.tried + i, s)))?;
        if i > self.tried {
            let r = self.replicas.remove(i);
            self.replicas.insert(self.tried, r);
        }
        self.tried += 1;
        Some(slot)
    }
}

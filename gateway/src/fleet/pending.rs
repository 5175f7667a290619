//! The queue of settlements Redis did not answer ([`Pending`]): bounded, replayed in order
//! by [`super::settlements`] when Redis answers again.

use parking_lot::Mutex;
use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

/// Most settlements the queue holds; beyond it new ones are dropped (and counted): their
/// reservations lapse with the bucket's refill and their leases with `state.lease_ttl_s`.
pub(crate) const MAX_PENDING: usize = 100_000;

/// One settlement of an admission on a tenant's shared limits.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Settlement {
    /// The tenant.
    pub tenant: Arc<str>,
    /// Its `tokens_per_minute` (0: no token limit).
    pub tokens_per_minute: u64,
    /// Reserved minus used tokens (negative: used beyond the reservation).
    pub delta: i64,
    /// The admission's lease id.
    pub lease: String,
    /// Whether the gateway gave up on the admission (it may not have run yet).
    pub abandoned: bool,
}

/// The queue of settlements waiting for Redis.
#[derive(Debug, Default)]
pub(crate) struct Pending {
    queue: Mutex<VecDeque<Settlement>>,
    replaying: AtomicBool,
}

impl Pending {
    /// Queues `s`; false (nothing queued) when the queue is full.
    pub(super) fn push(&self, s: Settlement) -> bool {
        let mut q = self.queue.lock();
        if q.len() >= MAX_PENDING {
            return false;
        }
        q.push_back(s);
        true
    }

    /// Up to `n` settlements from the front.
    pub(super) fn take(&self, n: usize) -> Vec<Settlement> {
        let mut q = self.queue.lock();
        let n = n.min(q.len());
        q.drain(..n).collect()
    }

    /// Puts `rest` back at the front, in order.
    pub(super) fn put_back(&self, rest: Vec<Settlement>) {
        let mut q = self.queue.lock();
        for s in rest.into_iter().rev() {
            q.push_front(s);
        }
    }

    /// Marks a replay as running; false when one already is.
    pub(super) fn start_replay(&self) -> bool {
        !self.replaying.swap(true, Ordering::AcqRel)
    }

    /// Marks the replay as ended.
    pub(super) fn end_replay(&self) {
        self.replaying.store(false, Ordering::Release);
    }

    /// Settlements waiting now.
    pub(crate) fn len(&self) -> usize {
        self.queue.lock().len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(lease: &str) -> Settlement {
        Settlement {
            tenant: Arc::from("t"),
            tokens_per_minute: 0,
            delta: 0,
            lease: lease.into(),
            abandoned: false,
        }
    }

    #[test]
    fn the_queue_is_bounded_and_keeps_order_across_a_failed_replay() {
        let p = Pending::default();
        for i in 0..MAX_PENDING {
            assert!(p.push(s(&i.to_string())));
        }
        assert!(!p.push(s("one too many")));
        assert_eq!(p.len(), MAX_PENDING);
        let mut batch = p.take(3);
        assert_eq!(
            batch.iter().map(|x| x.lease.as_str()).collect::<Vec<_>>(),
            ["0", "1", "2"]
        );
        // The first was sent; the other two go back in front.
        batch.remove(0);
        p.put_back(batch);
        let again = p.take(3);
        assert_eq!(
            again.iter().map(|x| x.lease.as_str()).collect::<Vec<_>>(),
            ["1", "2", "3"]
        );
        assert_eq!(p.len(), MAX_PENDING - 4);
    }
}

//! The gateway-wide budget of request body bytes held in flight
//! (`limits.max_inflight_body_bytes`). A request takes its share before its body is read
//! (its `Content-Length`, or chunk by chunk as a body without one arrives) and keeps it
//! while the gateway keeps the body for retries, until the request ends. A request that
//! does not fit is refused with 503 at once: many large bodies at once never exhaust the
//! gateway's memory.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

/// The bytes held now, shared by every request.
#[derive(Debug, Default)]
pub(crate) struct BodyBudget {
    held: Arc<AtomicUsize>,
}

/// One request's share; given back when dropped.
#[derive(Debug)]
pub(crate) struct BodyPermit {
    held: Arc<AtomicUsize>,
    bytes: usize,
}

/// Adds `bytes` to `held` if the total stays within `limit`.
fn take(held: &AtomicUsize, bytes: usize, limit: usize) -> bool {
    held.fetch_update(Ordering::AcqRel, Ordering::Acquire, |now| {
        now.checked_add(bytes).filter(|total| *total <= limit)
    })
    .is_ok()
}

impl BodyBudget {
    /// A share of `bytes`, if the budget of `limit` bytes has room.
    pub(crate) fn try_take(&self, bytes: usize, limit: usize) -> Option<BodyPermit> {
        take(&self.held, bytes, limit).then(|| BodyPermit {
            held: self.held.clone(),
            bytes,
        })
    }

    /// Bytes held by every request now.
    pub(crate) fn held(&self) -> usize {
        self.held.load(Ordering::Acquire)
    }
}

impl BodyPermit {
    /// Grows the share to at least `total` bytes (a body without `Content-Length` that
    /// keeps arriving); false, and unchanged, when the budget of `limit` has no room.
    pub(crate) fn grow_to(&mut self, total: usize, limit: usize) -> bool {
        if total <= self.bytes {
            return true;
        }
        let more = total - self.bytes;
        if !take(&self.held, more, limit) {
            return false;
        }
        self.bytes = total;
        true
    }
}

impl Drop for BodyPermit {
    fn drop(&mut self) {
        self.held.fetch_sub(self.bytes, Ordering::AcqRel);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shares_fit_the_limit_and_come_back_when_dropped() {
        let b = BodyBudget::default();
        let one = b.try_take(600, 1000).expect("fits");
        assert!(b.try_take(500, 1000).is_none(), "600 + 500 > 1000");
        let mut two = b.try_take(400, 1000).expect("600 + 400 fits");
        assert!(!two.grow_to(401, 1000), "no room to grow");
        assert_eq!(b.held(), 1000);
        drop(one);
        assert!(two.grow_to(900, 1000));
        assert_eq!(b.held(), 900);
        assert!(two.grow_to(10, 1000), "never shrinks");
        drop(two);
        assert_eq!(b.held(), 0);
    }

    #[test]
    fn many_threads_never_hold_more_than_the_limit() {
        let b = Arc::new(BodyBudget::default());
        let peak = Arc::new(AtomicUsize::new(0));
        let threads: Vec<_> = (0..8)
            .map(|_| {
                let (b, peak) = (b.clone(), peak.clone());
                std::thread::spawn(move || {
                    for _ in 0..2000 {
                        if let Some(p) = b.try_take(300, 1000) {
                            peak.fetch_max(b.held(), Ordering::AcqRel);
                            drop(p);
                        }
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        assert!(peak.load(Ordering::Acquire) <= 1000);
        assert_eq!(b.held(), 0);
    }
}

//! The byte budget of KV loads: every load from a [`KvSource`](super::source::KvSource)
//! reserves, before it fetches anything, the most bytes it can hold at once (its batch,
//! the source's read-ahead and the record being checked), and gives them back when it
//! ends. All loads together therefore hold at most `--kv-load-memory` bytes of blocks on
//! their way into the pool, however many long prompts arrive at once; a load that finds
//! no room within its source's patience computes the prompt instead (reason `busy`).

use std::time::Duration;
use tokio::sync::{Semaphore, SemaphorePermit};

/// Bytes per semaphore permit (the budget is counted in KiB so that it fits `u32`).
const UNIT: u64 = 1024;

/// A shared byte budget.
#[derive(Debug)]
pub struct LoadBudget {
    permits: Semaphore,
    total: u32,
}

/// Bytes held for one load; dropping it gives them back.
#[derive(Debug)]
pub struct Reservation<'a> {
    _permit: SemaphorePermit<'a>,
}

impl LoadBudget {
    /// A budget of `bytes` (rounded up to whole KiB, at most 4 TiB).
    pub fn new(bytes: u64) -> Self {
        let total = units(bytes);
        Self {
            permits: Semaphore::new(total as usize),
            total,
        }
    }

    /// The whole budget, in bytes.
    pub fn total_bytes(&self) -> u64 {
        u64::from(self.total) * UNIT
    }

    /// Bytes not reserved now.
    pub fn available_bytes(&self) -> u64 {
        self.permits.available_permits() as u64 * UNIT
    }

    /// Whether one reservation of `bytes` can ever be granted.
    pub fn fits(&self, bytes: u64) -> bool {
        units(bytes) <= self.total
    }

    /// Reserves `bytes`, waiting at most `patience` for other loads to give theirs back;
    /// `None` when they did not, or when `bytes` is more than the whole budget.
    pub async fn reserve(&self, bytes: u64, patience: Duration) -> Option<Reservation<'_>> {
        if !self.fits(bytes) {
            return None;
        }
        let permit = tokio::time::timeout(patience, self.permits.acquire_many(units(bytes)))
            .await
            .ok()?
            .ok()?;
        Some(Reservation { _permit: permit })
    }
}

fn units(bytes: u64) -> u32 {
    u32::try_from(bytes.div_ceil(UNIT)).unwrap_or(u32::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn reservations_wait_for_room_and_give_it_back() {
        let b = LoadBudget::new(10 * 1024);
        assert_eq!(b.total_bytes(), 10 * 1024);
        let ms = Duration::from_millis;
        let first = b.reserve(6 * 1024, ms(10)).await.expect("room");
        assert_eq!(b.available_bytes(), 4 * 1024);
        // Rounded up to whole KiB: 4 KiB + 1 byte does not fit in the 4 KiB left.
        assert!(b.reserve(4 * 1024 + 1, ms(20)).await.is_none());
        assert!(b.reserve(11 * 1024, ms(10)).await.is_none(), "never fits");
        let waiting = b.reserve(8 * 1024, Duration::from_secs(10));
        let release = async {
            tokio::time::sleep(ms(20)).await;
            drop(first);
        };
        let (got, ()) = tokio::join!(waiting, release);
        assert!(got.is_some(), "granted once the first gave its bytes back");
        assert_eq!(b.available_bytes(), 2 * 1024);
        drop(got);
        assert_eq!(b.available_bytes(), 10 * 1024);
    }
}

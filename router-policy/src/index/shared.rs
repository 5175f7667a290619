//! The shared-tier part: block hashes known to be in the cluster's shared KV tier.
//!
//! Fed by `tier: shared` Stored/Removed events from any replica (the tier is one store, so
//! who wrote a block does not matter and nobody becomes its holder). Bounded to
//! `max_entries` blocks; beyond that the least recently stored go first. The bound only
//! caps memory: the tier evicts by its own policy, and an eviction nobody reports with
//! `Removed` (Redis's own LRU) leaves an entry behind, which costs a replica one lookup
//! that misses.

use super::lru::LruTable;
use warmpath_core::ids::BlockHash;

/// Set of block hashes in the shared tier, with LRU eviction past a bound.
#[derive(Debug)]
pub(crate) struct SharedTier {
    table: LruTable<()>,
    max_entries: usize,
    evicted: u64,
}

impl SharedTier {
    /// An empty set holding at most `max_entries` blocks (0: shared events are ignored).
    pub(crate) fn new(max_entries: usize) -> Self {
        Self {
            table: LruTable::new(),
            max_entries,
            evicted: 0,
        }
    }

    /// Blocks held.
    #[inline]
    pub(crate) fn len(&self) -> usize {
        self.table.len()
    }

    /// True when no block is known to be in the tier (matching then skips the tier).
    #[inline]
    pub(crate) fn is_empty(&self) -> bool {
        self.table.len() == 0
    }

    /// Whether `h` is in the tier.
    #[inline]
    pub(crate) fn contains(&self, h: BlockHash) -> bool {
        self.table.find(h).is_some()
    }

    /// Blocks dropped by the memory bound since creation.
    pub(crate) fn evicted(&self) -> u64 {
        self.evicted
    }

    /// Records that `h` was written to the tier; it becomes the most recently stored.
    pub(crate) fn store(&mut self, h: BlockHash) {
        if self.max_entries == 0 {
            return;
        }
        self.table.upsert_mru(h);
        while self.table.len() > self.max_entries {
            let Some(i) = self.table.lru() else { break };
            self.table.remove_at(i);
            self.evicted += 1;
        }
    }

    /// Records that the tier evicted `h`.
    pub(crate) fn remove(&mut self, h: BlockHash) {
        if let Some(i) = self.table.find(h) {
            self.table.remove_at(i);
        }
    }

    /// Length of the run of consecutive blocks of `hashes` from `from` that the tier holds.
    pub(crate) fn run_from(&self, hashes: &[BlockHash], from: usize) -> u32 {
        let rest = hashes.get(from..).unwrap_or(&[]);
        rest.iter().take_while(|&&h| self.contains(h)).count() as u32
    }

    /// Heap bytes held.
    pub(crate) fn allocated_bytes(&self) -> usize {
        self.table.allocated_bytes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hs(xs: &[u64]) -> Vec<BlockHash> {
        xs.iter().map(|&x| BlockHash(x)).collect()
    }

    #[test]
    fn bounded_with_lru_eviction_and_runs() {
        let mut t = SharedTier::new(3);
        for h in [1, 2, 3] {
            t.store(BlockHash(h));
        }
        assert_eq!(t.run_from(&hs(&[1, 2, 3, 4]), 0), 3);
        // Re-storing 1 makes it the most recent: 2 goes when 4 arrives.
        t.store(BlockHash(1));
        t.store(BlockHash(4));
        assert_eq!(t.len(), 3);
        assert_eq!(t.evicted(), 1);
        assert!(!t.contains(BlockHash(2)));
        assert_eq!(t.run_from(&hs(&[1, 2, 3, 4]), 0), 1);
        assert_eq!(t.run_from(&hs(&[1, 2, 3, 4]), 2), 2);
        assert_eq!(t.run_from(&hs(&[1, 2, 3, 4]), 9), 0);
        t.remove(BlockHash(3));
        t.remove(BlockHash(3));
        assert_eq!(t.run_from(&hs(&[1, 2, 3, 4]), 2), 0);
        assert_eq!(t.len(), 2);
        let mut off = SharedTier::new(0);
        off.store(BlockHash(1));
        assert!(off.is_empty());
    }
}

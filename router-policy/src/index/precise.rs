//! The precise part: which replica holds which block, fed only by replica KV events.

use super::lru::LruTable;
use super::replica_set::ReplicaSet;
use std::collections::HashMap;
use warmpath_core::ids::{BlockHash, ReplicaId};

/// Block -> holders, bounded to `max_entries` (block, replica) pairs by evicting the least
/// recently stored blocks.
#[derive(Debug)]
pub(crate) struct PreciseIndex {
    table: LruTable<ReplicaSet>,
    entries: usize,
    max_entries: usize,
    per_replica: HashMap<ReplicaId, usize>,
    evicted: u64,
}

impl PreciseIndex {
    pub(crate) fn new(max_entries: usize) -> Self {
        Self {
            table: LruTable::new(),
            entries: 0,
            max_entries,
            per_replica: HashMap::new(),
            evicted: 0,
        }
    }

    /// (block, replica) pairs held.
    pub(crate) fn entries(&self) -> usize {
        self.entries
    }

    /// Distinct blocks held.
    pub(crate) fn blocks(&self) -> usize {
        self.table.len()
    }

    /// Blocks `r` holds.
    pub(crate) fn replica_blocks(&self, r: ReplicaId) -> usize {
        self.per_replica.get(&r).copied().unwrap_or(0)
    }

    /// (block, replica) pairs dropped to respect the memory bound, since creation.
    pub(crate) fn evicted(&self) -> u64 {
        self.evicted
    }

    /// Holders of `h`.
    #[inline]
    pub(crate) fn holders(&self, h: BlockHash) -> Option<&ReplicaSet> {
        self.table.get(h)
    }

    /// Records that `r` stores `h`; the block becomes most recently used.
    pub(crate) fn store(&mut self, r: ReplicaId, h: BlockHash) {
        let i = self.table.upsert_mru(h);
        if self.table.value_mut(i).insert(r) {
            self.entries += 1;
            *self.per_replica.entry(r).or_insert(0) += 1;
        }
        self.enforce_bound();
    }

    /// Records that `r` evicted `h`.
    pub(crate) fn remove(&mut self, r: ReplicaId, h: BlockHash) {
        let Some(i) = self.table.find(h) else { return };
        let set = self.table.value_mut(i);
        if !set.remove(r) {
            return;
        }
        let now_empty = set.is_empty();
        self.entries -= 1;
        self.dec(r, 1);
        if now_empty {
            self.table.remove_at(i);
        }
    }

    /// Drops everything `r` holds. O(blocks); skipped when `r` holds nothing.
    pub(crate) fn clear_replica(&mut self, r: ReplicaId) {
        let Some(n) = self.per_replica.remove(&r) else {
            return;
        };
        if n == 0 {
            return;
        }
        let mut removed = 0usize;
        self.table.retain(|_, set| {
            if set.remove(r) {
                removed += 1;
            }
            !set.is_empty()
        });
        debug_assert_eq!(removed, n, "per-replica count out of sync");
        self.entries -= removed;
    }

    /// Heap bytes held (table, slab and spilled replica sets).
    pub(crate) fn allocated_bytes(&self) -> usize {
        let spilled: usize = self
            .table
            .iter_mru()
            .map(|(_, s)| match s {
                ReplicaSet::Heap(v) => std::mem::size_of::<Vec<u32>>() + v.capacity() * 4,
                ReplicaSet::Inline { .. } => 0,
            })
            .sum();
        self.table.allocated_bytes() + spilled
    }

    fn dec(&mut self, r: ReplicaId, by: usize) {
        if let Some(n) = self.per_replica.get_mut(&r) {
            *n -= by;
            if *n == 0 {
                self.per_replica.remove(&r);
            }
        }
    }

    fn enforce_bound(&mut self) {
        while self.entries > self.max_entries {
            let Some(i) = self.table.lru() else { break };
            let set = self.table.remove_at(i);
            self.entries -= set.len();
            self.evicted += set.len() as u64;
            for &r in set.as_slice() {
                self.dec(ReplicaId(r), 1);
            }
        }
    }
}

//! A hash table of blocks with an intrusive LRU list, sized for millions of entries.
//!
//! Layout: a slab `Vec<Slot<V>>` holds the block hash, the LRU links (u32 slab indices) and
//! the payload; a `hashbrown::HashTable<u32>` maps a block hash to its slab index (4 bytes per
//! bucket plus one control byte). Block hashes are already xxh3 outputs, so the table only
//! mixes them with a per-table random key (cheap, and keeps crafted prompts from colliding).
//!
//! All operations are O(1) except [`LruTable::retain`], which scans the slab.

use hashbrown::HashTable;
use std::hash::{BuildHasher, Hasher};
use warmpath_core::ids::BlockHash;

/// End of the list.
const NIL: u32 = u32::MAX;
/// `prev` marker of a slot on the free list.
const FREE: u32 = u32::MAX - 1;

#[derive(Debug)]
struct Slot<V> {
    hash: u64,
    prev: u32,
    next: u32,
    value: V,
}

/// Map from block hash to `V`, ordered by recency of insertion or [`LruTable::touch`].
#[derive(Debug)]
pub(crate) struct LruTable<V> {
    table: HashTable<u32>,
    slots: Vec<Slot<V>>,
    free: u32,
    head: u32,
    tail: u32,
    len: usize,
    key: u64,
}

#[inline]
fn mix(key: u64, h: u64) -> u64 {
    let x = (h ^ key).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    x ^ (x >> 29)
}

impl<V: Default> Default for LruTable<V> {
    fn default() -> Self {
        Self::new()
    }
}

impl<V: Default> LruTable<V> {
    /// An empty table with a random hashing key.
    pub(crate) fn new() -> Self {
        let key = std::collections::hash_map::RandomState::new()
            .build_hasher()
            .finish();
        Self {
            table: HashTable::new(),
            slots: Vec::new(),
            free: NIL,
            head: NIL,
            tail: NIL,
            len: 0,
            key,
        }
    }

    /// Number of blocks.
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// Slab index of `h`, if present.
    #[inline]
    pub(crate) fn find(&self, h: BlockHash) -> Option<u32> {
        let slots = &self.slots;
        self.table
            .find(mix(self.key, h.0), |&i| slots[i as usize].hash == h.0)
            .copied()
    }

    /// The payload of `h`, if present.
    #[inline]
    pub(crate) fn get(&self, h: BlockHash) -> Option<&V> {
        self.find(h).map(|i| &self.slots[i as usize].value)
    }

    /// The payload at a slab index returned by this table.
    pub(crate) fn value_mut(&mut self, idx: u32) -> &mut V {
        &mut self.slots[idx as usize].value
    }

    /// The block hash at a slab index returned by this table.
    #[cfg(test)]
    pub(crate) fn hash_at(&self, idx: u32) -> BlockHash {
        BlockHash(self.slots[idx as usize].hash)
    }

    /// Slab index of `h`, inserting an empty payload if absent; either way `h` becomes the
    /// most recently used entry.
    pub(crate) fn upsert_mru(&mut self, h: BlockHash) -> u32 {
        if let Some(i) = self.find(h) {
            self.touch(i);
            return i;
        }
        let i = self.alloc(h.0);
        let key = self.key;
        let slots = &self.slots;
        self.table
            .insert_unique(mix(key, h.0), i, |&j| mix(key, slots[j as usize].hash));
        self.push_front(i);
        self.len += 1;
        i
    }

    /// Marks a slot most recently used.
    pub(crate) fn touch(&mut self, i: u32) {
        if self.head != i {
            self.unlink(i);
            self.push_front(i);
        }
    }

    /// Slab index of the least recently used entry.
    pub(crate) fn lru(&self) -> Option<u32> {
        (self.tail != NIL).then_some(self.tail)
    }

    /// Removes `h`, returning its payload.
    #[cfg(test)]
    pub(crate) fn remove(&mut self, h: BlockHash) -> Option<V> {
        self.find(h).map(|i| self.remove_at(i))
    }

    /// Removes the entry at a slab index, returning its payload.
    pub(crate) fn remove_at(&mut self, i: u32) -> V {
        let h = self.slots[i as usize].hash;
        if let Ok(entry) = self.table.find_entry(mix(self.key, h), |&j| j == i) {
            entry.remove();
        }
        self.unlink(i);
        let slot = &mut self.slots[i as usize];
        slot.prev = FREE;
        slot.next = self.free;
        self.free = i;
        self.len -= 1;
        std::mem::take(&mut slot.value)
    }

    /// Keeps only the entries for which `keep` returns true (it may also edit them).
    /// O(slab size).
    pub(crate) fn retain(&mut self, mut keep: impl FnMut(BlockHash, &mut V) -> bool) {
        for i in 0..self.slots.len() {
            let slot = &mut self.slots[i];
            if slot.prev == FREE {
                continue;
            }
            if !keep(BlockHash(slot.hash), &mut slot.value) {
                self.remove_at(i as u32);
            }
        }
    }

    /// Every entry, most recently used first (for tests and debugging).
    pub(crate) fn iter_mru(&self) -> impl Iterator<Item = (BlockHash, &V)> + '_ {
        let mut i = self.head;
        std::iter::from_fn(move || {
            if i == NIL {
                return None;
            }
            let s = &self.slots[i as usize];
            i = s.next;
            Some((BlockHash(s.hash), &s.value))
        })
    }

    /// Bytes held by the table and slab themselves (payload heap allocations not included).
    pub(crate) fn allocated_bytes(&self) -> usize {
        self.slots.capacity() * std::mem::size_of::<Slot<V>>()
            + self.table.capacity() * std::mem::size_of::<u32>()
            + self.table.capacity().next_power_of_two() // control bytes, about one per bucket
    }

    fn alloc(&mut self, hash: u64) -> u32 {
        if self.free != NIL {
            let i = self.free;
            let slot = &mut self.slots[i as usize];
            self.free = slot.next;
            slot.hash = hash;
            slot.prev = NIL;
            slot.next = NIL;
            i
        } else {
            let i =
                u32::try_from(self.slots.len()).expect("fewer than 2^32 - 2 blocks in one index");
            assert!(i < FREE, "index slab full");
            self.slots.push(Slot {
                hash,
                prev: NIL,
                next: NIL,
                value: V::default(),
            });
            i
        }
    }

    fn unlink(&mut self, i: u32) {
        let (prev, next) = {
            let s = &self.slots[i as usize];
            (s.prev, s.next)
        };
        if prev == NIL {
            self.head = next;
        } else {
            self.slots[prev as usize].next = next;
        }
        if next == NIL {
            self.tail = prev;
        } else {
            self.slots[next as usize].prev = prev;
        }
    }

    fn push_front(&mut self, i: u32) {
        let old = self.head;
        {
            let s = &mut self.slots[i as usize];
            s.prev = NIL;
            s.next = old;
        }
        if old == NIL {
            self.tail = i;
        } else {
            self.slots[old as usize].prev = i;
        }
        self.head = i;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn keys(t: &LruTable<u32>) -> Vec<u64> {
        t.iter_mru().map(|(h, _)| h.0).collect()
    }

    #[test]
    fn lru_order_follows_inserts_and_touches() {
        let mut t: LruTable<u32> = LruTable::new();
        for k in 1..=4u64 {
            let i = t.upsert_mru(BlockHash(k));
            *t.value_mut(i) = k as u32 * 10;
        }
        assert_eq!(keys(&t), vec![4, 3, 2, 1]);
        t.upsert_mru(BlockHash(2));
        assert_eq!(keys(&t), vec![2, 4, 3, 1]);
        assert_eq!(t.get(BlockHash(2)), Some(&20));
        let lru = t.lru().unwrap();
        assert_eq!(t.hash_at(lru), BlockHash(1));
        assert_eq!(t.remove_at(lru), 10);
        assert_eq!(keys(&t), vec![2, 4, 3]);
        assert_eq!(t.remove(BlockHash(4)), Some(40));
        assert_eq!(t.remove(BlockHash(4)), None);
        assert_eq!(keys(&t), vec![2, 3]);
        assert_eq!(t.len(), 2);
        // Freed slots are reused and start empty.
        let i = t.upsert_mru(BlockHash(9));
        assert_eq!(*t.value_mut(i), 0);
        assert!(t.slots.len() <= 4);
        t.retain(|h, v| {
            *v += 1;
            h.0 != 3
        });
        assert_eq!(keys(&t), vec![9, 2]);
        assert_eq!(t.get(BlockHash(2)), Some(&21));
        assert_eq!(t.get(BlockHash(3)), None);
    }

    #[test]
    fn many_entries_survive_growth_and_churn() {
        let mut t: LruTable<u64> = LruTable::new();
        for k in 0..10_000u64 {
            let i = t.upsert_mru(BlockHash(k.wrapping_mul(0x1234_5678_9abc_def1)));
            *t.value_mut(i) = k;
        }
        for k in (0..10_000u64).step_by(2) {
            assert_eq!(
                t.remove(BlockHash(k.wrapping_mul(0x1234_5678_9abc_def1))),
                Some(k)
            );
        }
        for k in 0..10_000u64 {
            let got = t
                .get(BlockHash(k.wrapping_mul(0x1234_5678_9abc_def1)))
                .copied();
            assert_eq!(got, (k % 2 == 1).then_some(k));
        }
        assert_eq!(t.len(), 5_000);
        assert_eq!(t.iter_mru().count(), 5_000);
    }
}

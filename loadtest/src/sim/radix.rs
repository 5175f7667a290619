//! A replica's KV cache at block granularity: a radix tree of chained block hashes (a hash
//! names its whole prefix, so one map keyed by hash is the tree), with reference counts for
//! blocks in use and LRU eviction of unreferenced leaves, as in SGLang's radix cache.

use std::collections::{BTreeSet, HashMap};
use warmpath_core::BlockHash;

#[derive(Clone, Copy, Debug)]
struct Node {
    parent: Option<BlockHash>,
    children: u32,
    refs: u32,
    last_use: u64,
}

/// Block-level radix cache with LRU eviction of unreferenced leaves.
#[derive(Debug, Default)]
pub struct RadixCache {
    nodes: HashMap<BlockHash, Node>,
    evictable: BTreeSet<(u64, BlockHash)>,
    tick: u64,
}

impl RadixCache {
    /// An empty cache.
    pub fn new() -> Self {
        Self::default()
    }

    /// Blocks stored (referenced or not).
    pub fn len(&self) -> usize {
        self.nodes.len()
    }

    /// True when nothing is stored.
    pub fn is_empty(&self) -> bool {
        self.nodes.is_empty()
    }

    /// Blocks that could be evicted right now (unreferenced, any depth).
    pub fn evictable_leaves(&self) -> usize {
        self.evictable.len()
    }

    /// Number of leading blocks of `hashes` stored.
    pub fn match_len(&self, hashes: &[BlockHash]) -> usize {
        hashes
            .iter()
            .take_while(|h| self.nodes.contains_key(h))
            .count()
    }

    /// Takes a reference on every block of `hashes` (all must be stored) and marks them used.
    pub fn acquire(&mut self, hashes: &[BlockHash]) {
        self.tick += 1;
        for h in hashes {
            if let Some(n) = self.nodes.get_mut(h) {
                if n.refs == 0 && n.children == 0 {
                    self.evictable.remove(&(n.last_use, *h));
                }
                n.refs += 1;
                n.last_use = self.tick;
            }
        }
    }

    /// Drops one reference from every block of `hashes`; unreferenced leaves become evictable.
    pub fn release(&mut self, hashes: &[BlockHash]) {
        self.tick += 1;
        // Deepest first, so the recency order keeps parents older than their children.
        for h in hashes.iter().rev() {
            if let Some(n) = self.nodes.get_mut(h) {
                n.refs = n.refs.saturating_sub(1);
                n.last_use = self.tick;
                if n.refs == 0 && n.children == 0 {
                    self.evictable.insert((n.last_use, *h));
                }
            }
        }
    }

    /// Stores the chain `hashes` (parents first), taking one reference on each block, new or
    /// already present. Returns the index of the first newly stored block and the new blocks
    /// (contiguous: once one block is new, all deeper ones are).
    pub fn insert_acquired(&mut self, hashes: &[BlockHash]) -> (usize, Vec<BlockHash>) {
        let present = self.match_len(hashes);
        self.acquire(&hashes[..present]);
        let mut parent = present.checked_sub(1).map(|i| hashes[i]);
        let mut new = Vec::with_capacity(hashes.len() - present);
        for &h in &hashes[present..] {
            if let Some(ph) = parent {
                if let Some(p) = self.nodes.get_mut(&ph) {
                    if p.refs == 0 && p.children == 0 {
                        self.evictable.remove(&(p.last_use, ph));
                    }
                    p.children += 1;
                }
            }
            self.nodes.insert(
                h,
                Node {
                    parent,
                    children: 0,
                    refs: 1,
                    last_use: self.tick,
                },
            );
            new.push(h);
            parent = Some(h);
        }
        (present, new)
    }

    /// Evicts up to `n` least recently used unreferenced leaves (a parent becomes a leaf
    /// when its last child goes). Returns the evicted hashes.
    pub fn evict(&mut self, n: usize) -> Vec<BlockHash> {
        let mut out = Vec::with_capacity(n);
        while out.len() < n {
            let Some((_, h)) = self.evictable.pop_first() else {
                break;
            };
            let Some(node) = self.nodes.remove(&h) else {
                continue;
            };
            out.push(h);
            if let Some(ph) = node.parent {
                if let Some(p) = self.nodes.get_mut(&ph) {
                    p.children -= 1;
                    if p.children == 0 && p.refs == 0 {
                        self.evictable.insert((p.last_use, ph));
                    }
                }
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn h(xs: &[u64]) -> Vec<BlockHash> {
        xs.iter().map(|&x| BlockHash(x)).collect()
    }

    #[test]
    fn lru_evicts_unreferenced_leaves_first_and_keeps_prefixes() {
        let mut c = RadixCache::new();
        let a = h(&[1, 2, 3]);
        let b = h(&[1, 2, 4]);
        let (present, new) = c.insert_acquired(&a);
        assert_eq!((present, new.len()), (0, 3));
        let (present, new) = c.insert_acquired(&b);
        assert_eq!((present, new), (2, h(&[4])));
        assert_eq!(c.len(), 4);
        // Everything referenced: nothing to evict.
        assert!(c.evict(10).is_empty());
        c.release(&a);
        // Only leaf 3 is free (1 and 2 are still held by b).
        assert_eq!(c.evict(10), h(&[3]));
        c.release(&b);
        // Then 4, then its parents as they become leaves.
        assert_eq!(c.evict(10), h(&[4, 2, 1]));
        assert!(c.is_empty());
    }

    #[test]
    fn recently_used_chains_survive() {
        let mut c = RadixCache::new();
        for chain in [h(&[10, 11]), h(&[20, 21]), h(&[30, 31])] {
            c.insert_acquired(&chain);
            c.release(&chain);
        }
        // Touch chain 10 again: chain 20 becomes the oldest.
        c.acquire(&h(&[10, 11]));
        c.release(&h(&[10, 11]));
        assert_eq!(c.evict(2), h(&[21, 20]));
        assert_eq!(c.match_len(&h(&[10, 11, 12])), 2);
        assert_eq!(c.match_len(&h(&[20, 21])), 0);
    }
}

//! The radix prefix cache: one node per cached full block, keyed by its chained
//! [`BlockHash`] (so the checkpoint and the tenant salt are part of the key), over the
//! [`PagePool`].
//!
//! * A sequence locks every node of its cached prefix; locked nodes (and so their pages)
//!   are never evicted. Because a sequence always locks a whole root path, an unlocked
//!   node has only unlocked descendants.
//! * Eviction takes unlocked leaves, least recently used first, with nodes that served
//!   more than one sequence (hot shared prefixes) after all single-use ones; evicting a
//!   leaf can make its parent a leaf (cascading).
//! * Every change is recorded as a [`KvEvent`]; the caller drains them with
//!   [`RadixCache::take_events`] after the step that wrote the pages.

use crate::pool::PagePool;
use std::collections::{BTreeSet, HashMap};
use warmpath_core::{BlockHash, KvEvent, KvTier, PageId};

/// A node of the cache. Stable while the node is locked.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct NodeId(u32);

/// Eviction order: single-use before shared, then least recently used.
type EvictKey = (bool, u64, NodeId);

#[derive(Debug)]
struct Node {
    hash: BlockHash,
    page: PageId,
    parent: Option<NodeId>,
    children: u32,
    refs: u32,
    uses: u32,
    last_access: u64,
    evict_key: Option<EvictKey>,
}

/// Result of [`RadixCache::insert`]; either way the node comes back locked.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Inserted {
    /// The block is new; the caller's page now belongs to the node.
    New(NodeId),
    /// Another sequence cached the same block first; the caller should use this node's
    /// page and free its own.
    Existing(NodeId),
}

impl Inserted {
    /// The (locked) node.
    pub fn node(self) -> NodeId {
        match self {
            Inserted::New(n) | Inserted::Existing(n) => n,
        }
    }
}

/// Prefix cache plus page allocator.
#[derive(Debug)]
pub struct RadixCache {
    pool: PagePool,
    nodes: Vec<Option<Node>>,
    free_slots: Vec<u32>,
    by_hash: HashMap<BlockHash, NodeId>,
    evictable: BTreeSet<EvictKey>,
    unlocked: usize,
    clock: u64,
    events: Vec<KvEvent>,
}

impl RadixCache {
    /// An empty cache over `pages` pages.
    pub fn new(pages: usize) -> Self {
        Self {
            pool: PagePool::new(pages),
            nodes: Vec::new(),
            free_slots: Vec::new(),
            by_hash: HashMap::new(),
            evictable: BTreeSet::new(),
            unlocked: 0,
            clock: 0,
            events: Vec::new(),
        }
    }

    fn node(&self, id: NodeId) -> &Node {
        match self.nodes.get(id.0 as usize) {
            Some(Some(n)) => n,
            _ => panic!("stale radix node id {id:?}"),
        }
    }

    fn node_mut(&mut self, id: NodeId) -> &mut Node {
        match self.nodes.get_mut(id.0 as usize) {
            Some(Some(n)) => n,
            _ => panic!("stale radix node id {id:?}"),
        }
    }

    fn tick(&mut self) -> u64 {
        self.clock += 1;
        self.clock
    }

    /// Puts `id` in or out of the evictable set according to its state.
    fn refresh(&mut self, id: NodeId) {
        let n = self.node(id);
        let want = (n.refs == 0 && n.children == 0).then_some((n.uses > 1, n.last_access, id));
        let old = n.evict_key;
        if old == want {
            return;
        }
        if let Some(k) = old {
            self.evictable.remove(&k);
        }
        if let Some(k) = want {
            self.evictable.insert(k);
        }
        self.node_mut(id).evict_key = want;
    }

    // === lookups ===

    /// The node caching `hash` as the child of `parent` (`None`: a first block).
    fn child(&self, parent: Option<NodeId>, hash: &BlockHash) -> Option<NodeId> {
        let &id = self.by_hash.get(hash)?;
        (self.node(id).parent == parent).then_some(id)
    }

    /// Number of leading `hashes` that are cached as one root path, without touching
    /// anything.
    pub fn peek_prefix_len(&self, hashes: &[BlockHash]) -> usize {
        let mut prev = None;
        let mut n = 0;
        for h in hashes {
            match self.child(prev, h) {
                Some(id) => prev = Some(id),
                None => break,
            }
            n += 1;
        }
        n
    }

    /// The nodes of the longest cached root path along `hashes` (stopping at the first
    /// miss), marked as recently used. The nodes are not locked.
    pub fn match_prefix(&mut self, hashes: &[BlockHash]) -> Vec<NodeId> {
        let mut out: Vec<NodeId> = Vec::new();
        for h in hashes {
            let Some(id) = self.child(out.last().copied(), h) else {
                break;
            };
            let t = self.tick();
            self.node_mut(id).last_access = t;
            self.refresh(id);
            out.push(id);
        }
        out
    }

    /// The page holding `node`'s block.
    pub fn page(&self, node: NodeId) -> PageId {
        self.node(node).page
    }

    /// The hash of `node`'s block.
    pub fn hash(&self, node: NodeId) -> BlockHash {
        self.node(node).hash
    }

    /// The node caching `hash`, if any.
    pub fn lookup(&self, hash: BlockHash) -> Option<NodeId> {
        self.by_hash.get(&hash).copied()
    }

    // === locking ===

    /// Locks `nodes` (one reference each): they and their pages stay until unlocked.
    pub fn lock(&mut self, nodes: &[NodeId]) {
        for &id in nodes {
            let n = self.node_mut(id);
            n.refs += 1;
            n.uses = n.uses.saturating_add(1);
            let first = n.refs == 1;
            if first {
                self.unlocked -= 1;
            }
            self.refresh(id);
        }
    }

    /// Drops one reference from each of `nodes`.
    pub fn unlock(&mut self, nodes: &[NodeId]) {
        // Leaf-most first, so parents become evictable after their children.
        for &id in nodes.iter().rev() {
            let n = self.node_mut(id);
            debug_assert!(n.refs > 0, "unlocking an unlocked node");
            n.refs = n.refs.saturating_sub(1);
            let last = n.refs == 0;
            if last {
                self.unlocked += 1;
            }
            self.refresh(id);
        }
    }

    /// References held on `node`.
    pub fn refs(&self, node: NodeId) -> u32 {
        self.node(node).refs
    }

    // === pages ===

    /// Pages that [`RadixCache::alloc`] could hand out right now (free plus evictable).
    pub fn available_pages(&self) -> usize {
        self.pool.free_count() + self.unlocked
    }

    /// Takes `n` pages, evicting unlocked cached blocks (LRU leaves first) if needed.
    /// Returns `None`, evicting nothing, when `n` pages cannot be had.
    pub fn alloc(&mut self, n: usize) -> Option<Vec<PageId>> {
        if self.available_pages() < n {
            return None;
        }
        while self.pool.free_count() < n {
            if !self.evict_one() {
                return None;
            }
        }
        (0..n).map(|_| self.pool.alloc()).collect()
    }

    /// Returns pages that are not (or no longer) in the cache.
    pub fn free_pages(&mut self, pages: &[PageId]) {
        for &p in pages {
            self.pool.free(p);
        }
    }

    /// Evicts up to `n` unlocked blocks; returns how many were evicted.
    pub fn evict(&mut self, n: usize) -> usize {
        (0..n).take_while(|_| self.evict_one()).count()
    }

    fn evict_one(&mut self) -> bool {
        let Some(key) = self.evictable.pop_first() else {
            return false;
        };
        let id = key.2;
        let Some(node) = self.nodes.get_mut(id.0 as usize).and_then(Option::take) else {
            return false;
        };
        self.free_slots.push(id.0);
        self.by_hash.remove(&node.hash);
        self.pool.free(node.page);
        self.unlocked -= 1;
        if let Some(p) = node.parent {
            self.node_mut(p).children -= 1;
            self.refresh(p);
        }
        match self.events.last_mut() {
            Some(KvEvent::Removed {
                hashes,
                tier: KvTier::Device,
            }) => hashes.push(node.hash),
            _ => self.events.push(KvEvent::Removed {
                hashes: vec![node.hash],
                tier: KvTier::Device,
            }),
        }
        true
    }

    // === insertion ===

    /// Caches the block `hash` (whose K/V is already written in `page`) under `parent`
    /// (`None`: the first block). `parent` must be locked by the caller. The returned node
    /// is locked for the caller.
    pub fn insert(&mut self, parent: Option<NodeId>, hash: BlockHash, page: PageId) -> Inserted {
        if let Some(&id) = self.by_hash.get(&hash) {
            self.lock(&[id]);
            return Inserted::Existing(id);
        }
        let t = self.tick();
        let node = Node {
            hash,
            page,
            parent,
            children: 0,
            refs: 1,
            uses: 1,
            last_access: t,
            evict_key: None,
        };
        let id = match self.free_slots.pop() {
            Some(slot) => {
                self.nodes[slot as usize] = Some(node);
                NodeId(slot)
            }
            None => {
                self.nodes.push(Some(node));
                NodeId(self.nodes.len() as u32 - 1)
            }
        };
        self.by_hash.insert(hash, id);
        let parent_hash = parent.map(|p| {
            self.node_mut(p).children += 1;
            self.refresh(p);
            self.node(p).hash
        });
        match self.events.last_mut() {
            Some(KvEvent::Stored {
                hashes,
                tier: KvTier::Device,
                ..
            }) if hashes.last().copied() == parent_hash => hashes.push(hash),
            _ => self.events.push(KvEvent::Stored {
                parent: parent_hash,
                hashes: vec![hash],
                tier: KvTier::Device,
            }),
        }
        Inserted::New(id)
    }

    /// Drops every cached block. Fails (returning `false`) while any block is locked.
    pub fn clear(&mut self) -> bool {
        if self.unlocked != self.by_hash.len() {
            return false;
        }
        for node in self.nodes.drain(..).flatten() {
            self.pool.free(node.page);
        }
        self.free_slots.clear();
        self.by_hash.clear();
        self.evictable.clear();
        self.unlocked = 0;
        self.events.clear();
        self.events.push(KvEvent::Cleared);
        true
    }

    /// Drains the changes since the last call, in order.
    pub fn take_events(&mut self) -> Vec<KvEvent> {
        std::mem::take(&mut self.events)
    }

    // === stats ===

    /// Pages in the pool.
    pub fn total_pages(&self) -> usize {
        self.pool.total()
    }

    /// Pages handed out (cached or private to a sequence).
    pub fn used_pages(&self) -> usize {
        self.pool.total() - self.pool.free_count()
    }

    /// Cached blocks.
    pub fn cached_blocks(&self) -> usize {
        self.by_hash.len()
    }

    /// Cached blocks that some sequence holds.
    pub fn locked_blocks(&self) -> usize {
        self.by_hash.len() - self.unlocked
    }

    /// Every cached hash (unordered).
    pub fn cached_hashes(&self) -> Vec<BlockHash> {
        self.by_hash.keys().copied().collect()
    }

    /// Whether `page` is handed out by the pool.
    pub fn page_in_use(&self, page: PageId) -> bool {
        self.pool.is_in_use(page)
    }
}

#[cfg(test)]
mod tests;

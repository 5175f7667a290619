//! The approximate part: where the router itself sent prefixes, with a TTL.
//!
//! Covers replicas that publish no KV events (any OpenAI-compatible server) and the short
//! window before a replica's `stored` events arrive (a burst of requests sharing a prefix).
//! Kept apart from the precise part so a guess never overwrites what a replica reported.

use super::lru::LruTable;
use crate::cluster::INLINE_REPLICAS;
use smallvec::SmallVec;
use warmpath_core::ids::{BlockHash, Millis, ReplicaId};

/// Raw replica ids holding one block, sorted (inline: the prefix walk allocates nothing for
/// a cluster of up to [`INLINE_REPLICAS`] holders).
pub(super) type Holders = SmallVec<[u32; INLINE_REPLICAS]>;

/// A record is renewed only once at least `ttl / RENEW_SLACK` of it has passed.
pub(crate) const RENEW_SLACK: u64 = 128;

/// One replica's routing record for one block.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct ApproxHolder {
    pub(crate) replica: ReplicaId,
    pub(crate) expires: Millis,
}

/// Block -> (replica, expiry), bounded to `max_entries` pairs and aged by TTL.
#[derive(Debug)]
pub(crate) struct ApproxIndex {
    table: LruTable<Vec<ApproxHolder>>,
    entries: usize,
    max_entries: usize,
    ttl: Millis,
}

impl ApproxIndex {
    pub(crate) fn new(max_entries: usize, ttl: Millis) -> Self {
        Self {
            table: LruTable::new(),
            entries: 0,
            max_entries,
            ttl,
        }
    }

    /// (block, replica) records held, including expired ones not yet reclaimed.
    pub(crate) fn entries(&self) -> usize {
        self.entries
    }

    /// Records that `r` was sent a request whose prefix chain is `hashes` at `now`.
    ///
    /// A record of `r` with more than `ttl - ttl / RENEW_SLACK` still to run is kept as it
    /// is: renewing moves the block to the front of the table, and a prefix sent to the same
    /// replica thousands of times a second does not need that each time. Such a record
    /// expires up to `ttl / RENEW_SLACK` early; with a TTL under `RENEW_SLACK` ms every
    /// record is renewed.
    pub(crate) fn record(&mut self, r: ReplicaId, hashes: &[BlockHash], now: Millis) {
        let expires = Millis(now.0.saturating_add(self.ttl.0));
        let slack = self.ttl.0 / RENEW_SLACK;
        let fresh_after = expires.0.saturating_sub(slack);
        for &h in hashes {
            if slack > 0 {
                let fresh = self.table.get(h).is_some_and(|v| {
                    v.iter()
                        .any(|x| x.replica == r && x.expires.0 > fresh_after)
                });
                if fresh {
                    continue;
                }
            }
            let i = self.table.upsert_mru(h);
            let holders = self.table.value_mut(i);
            let before = holders.len();
            // `r`'s record is renewed in place (the common case: the same prefix sent to
            // the same replica again); expired records of others are dropped.
            let mut renewed = false;
            holders.retain_mut(|x| {
                if x.replica == r {
                    x.expires = expires;
                    renewed = true;
                    true
                } else {
                    x.expires > now
                }
            });
            if !renewed {
                holders.push(ApproxHolder {
                    replica: r,
                    expires,
                });
            }
            let after = holders.len();
            self.entries = self.entries + after - before;
        }
        self.reclaim(now);
    }

    /// Appends the raw ids of the replicas with an unexpired record for `h` to `out`,
    /// sorted (the prefix walk's form: no iterator adapters per block).
    #[inline]
    pub(crate) fn push_holders(&self, h: BlockHash, now: Millis, out: &mut Holders) {
        let Some(v) = self.table.get(h) else {
            return;
        };
        let start = out.len();
        for x in v {
            if x.expires > now {
                out.push(x.replica.0);
            }
        }
        if out.len() - start > 1 {
            out[start..].sort_unstable();
        }
    }

    /// Unexpired blocks recorded for `r` (O(blocks); for tests and dashboards).
    pub(crate) fn replica_blocks(&self, r: ReplicaId, now: Millis) -> usize {
        self.table
            .iter_mru()
            .filter(|(_, v)| v.iter().any(|x| x.replica == r && x.expires > now))
            .count()
    }

    /// Drops every record of `r`.
    pub(crate) fn clear_replica(&mut self, r: ReplicaId) {
        let mut removed = 0;
        self.table.retain(|_, v| {
            let before = v.len();
            v.retain(|x| x.replica != r);
            removed += before - v.len();
            !v.is_empty()
        });
        self.entries -= removed;
    }

    /// Heap bytes held.
    pub(crate) fn allocated_bytes(&self) -> usize {
        let payload: usize = self
            .table
            .iter_mru()
            .map(|(_, v)| v.capacity() * std::mem::size_of::<ApproxHolder>())
            .sum();
        self.table.allocated_bytes() + payload
    }

    /// Drops blocks whose every record has expired (they sit at the LRU end, because a block
    /// moves to the front whenever it is recorded) and enforces the size bound.
    fn reclaim(&mut self, now: Millis) {
        while let Some(i) = self.table.lru() {
            let over = self.entries > self.max_entries;
            let v = self.table.value_mut(i);
            let expired = v.iter().all(|x| x.expires <= now);
            if !(over || expired) {
                break;
            }
            let n = v.len();
            self.table.remove_at(i);
            self.entries -= n;
        }
    }
}

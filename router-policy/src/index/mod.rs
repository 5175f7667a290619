//! The prefix index: which replica is likely to hold which prefix of a request.
//!
//! Two parts, kept separate:
//! - [`precise`]: fed only by replica KV events (snapshot + deltas, checked by a
//!   [`StreamCursor`] per replica). The truth as last reported.
//! - [`approx`]: the router's own routing history with a TTL, for replicas that publish no
//!   events and for the window before events arrive.
//! - [`shared`]: blocks in the cluster's shared KV tier, from `tier: shared` events of any
//!   replica; they make nobody a holder, but a replica can fetch them
//!   ([`PrefixMatches::tier_blocks`]).
//! - [`offload`]: blocks in a replica's own offload tier (`tier: offload`: vLLM's CPU or
//!   disk `medium`), per replica like precise, loadable by it only
//!   ([`PrefixMatches::offload_blocks`]).
//!
//! Both are bounded in memory with LRU eviction. Removing a replica, a `cleared` event or a
//! new epoch drops the replica's entries at once. See the crate README for the structure and
//! its costs.

mod approx;
mod lru;
mod matching;
mod offload;
mod precise;
mod replica_set;
mod shared;

#[cfg(test)]
mod tests;

pub use matching::{PrefixMatches, ReplicaMatch};

use crate::error::RouteError;
use serde::{Deserialize, Serialize};
use std::collections::HashMap;
use warmpath_core::events::{
    Epoch, KvEvent, KvStreamMessage, KvTier, Observation, SeqNo, StreamCursor,
};
use warmpath_core::ids::{BlockHash, Millis, ReplicaId};

/// Memory bounds and TTL of a [`PrefixIndex`].
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct IndexConfig {
    /// Most (block, replica) pairs the precise part keeps; least recently stored blocks go first.
    pub max_precise_entries: usize,
    /// Most (block, replica) pairs the approximate part keeps.
    pub max_approx_entries: usize,
    /// How long a routing record counts as "probably cached there". A record is renewed by
    /// a later route to the same replica once 1/128 of this has passed since it was last
    /// renewed, so it may read as expired up to that much early.
    pub approx_ttl: Millis,
    /// Most blocks of the shared KV tier the index keeps; least recently stored go first.
    /// 0 ignores shared-tier events.
    pub max_shared_entries: usize,
}

impl Default for IndexConfig {
    fn default() -> Self {
        // 4M pairs is about 180 MiB at the measured bytes/entry; 120 s is Dynamo's default TTL.
        Self {
            max_precise_entries: 4 << 20,
            max_approx_entries: 1 << 20,
            approx_ttl: Millis(120_000),
            max_shared_entries: 1 << 20,
        }
    }
}

impl IndexConfig {
    /// Checks the bounds.
    pub fn validate(&self) -> Result<(), RouteError> {
        if self.max_precise_entries == 0 {
            return Err(RouteError::invalid(
                "index.max_precise_entries",
                "must be at least 1",
            ));
        }
        if self.max_precise_entries >= (u32::MAX - 2) as usize {
            return Err(RouteError::invalid(
                "index.max_precise_entries",
                "must be below 2^32 - 2",
            ));
        }
        if self.max_approx_entries >= (u32::MAX - 2) as usize {
            return Err(RouteError::invalid(
                "index.max_approx_entries",
                "must be below 2^32 - 2",
            ));
        }
        if self.max_shared_entries >= (u32::MAX - 2) as usize {
            return Err(RouteError::invalid(
                "index.max_shared_entries",
                "must be below 2^32 - 2",
            ));
        }
        if self.approx_ttl.0 == 0 && self.max_approx_entries > 0 {
            return Err(RouteError::invalid(
                "index.approx_ttl",
                "must be positive (or set max_approx_entries = 0)",
            ));
        }
        Ok(())
    }
}

/// Counters for dashboards and index-health metrics.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct IndexStats {
    /// (block, replica) pairs in the precise part.
    pub precise_entries: usize,
    /// Distinct blocks in the precise part.
    pub precise_blocks: usize,
    /// (block, replica) records in the approximate part (including expired, not yet reclaimed).
    pub approx_entries: usize,
    /// Precise pairs dropped by the memory bound since creation.
    pub precise_evicted: u64,
    /// Replicas with a live event stream position.
    pub subscribed_replicas: usize,
    /// Blocks known to be in the shared KV tier.
    pub shared_entries: usize,
    /// Shared-tier blocks dropped by the memory bound since creation.
    pub shared_evicted: u64,
}

/// Precise + approximate prefix index over all replicas.
#[derive(Debug)]
pub struct PrefixIndex {
    cfg: IndexConfig,
    precise: precise::PreciseIndex,
    approx: approx::ApproxIndex,
    shared: shared::SharedTier,
    /// Replicas' offload tiers, bounded like the precise part.
    offloaded: precise::PreciseIndex,
    cursors: HashMap<ReplicaId, StreamCursor>,
}

impl Default for PrefixIndex {
    fn default() -> Self {
        Self::new(IndexConfig::default())
    }
}

impl PrefixIndex {
    /// An empty index. `cfg` should have passed [`IndexConfig::validate`]; a zero precise
    /// bound is raised to 1.
    pub fn new(cfg: IndexConfig) -> Self {
        let precise = precise::PreciseIndex::new(cfg.max_precise_entries.max(1));
        let approx = approx::ApproxIndex::new(cfg.max_approx_entries, cfg.approx_ttl);
        let shared = shared::SharedTier::new(cfg.max_shared_entries);
        let offloaded = precise::PreciseIndex::new(cfg.max_precise_entries.max(1));
        Self {
            cfg,
            precise,
            approx,
            shared,
            offloaded,
            cursors: HashMap::new(),
        }
    }

    /// The configuration.
    pub fn config(&self) -> &IndexConfig {
        &self.cfg
    }

    /// Folds one message of `replica`'s event stream into the precise part.
    ///
    /// - `Snapshot`: replaces everything known about the replica (a snapshot of a different
    ///   epoch also drops its routing history) and positions its cursor; returns `Apply`.
    /// - `Event`: classified by the replica's cursor. `Apply` applies it; `Duplicate` ignores
    ///   it; `Gap` keeps the (now stale) entries and applies nothing until the caller
    ///   resubscribes and a snapshot arrives; `NewEpoch` drops the replica's entries at once
    ///   and likewise waits for a snapshot. An event before any snapshot is a `Gap`.
    pub fn apply_message(&mut self, replica: ReplicaId, msg: &KvStreamMessage) -> Observation {
        match msg {
            KvStreamMessage::Snapshot { epoch, seq, hashes } => {
                self.apply_snapshot(replica, *epoch, *seq, hashes);
                Observation::Apply
            }
            KvStreamMessage::Event(rec) => {
                let cursor = self.cursors.entry(replica).or_default();
                let obs = cursor.observe(rec.epoch, rec.seq);
                match obs {
                    Observation::Apply => self.apply_event(replica, &rec.event),
                    Observation::Duplicate | Observation::Gap { .. } => {}
                    Observation::NewEpoch => {
                        self.drop_entries(replica);
                        self.cursors.insert(replica, StreamCursor::new());
                    }
                }
                obs
            }
        }
    }

    /// Forgets a replica entirely: precise entries, routing history and stream position.
    pub fn remove_replica(&mut self, replica: ReplicaId) {
        self.drop_entries(replica);
        self.cursors.remove(&replica);
    }

    /// Records that the router sent a request with prefix chain `hashes` to `replica` at
    /// `now` (approximate part). Call it with the final choice, after any retry.
    pub fn record_routed(&mut self, replica: ReplicaId, hashes: &[BlockHash], now: Millis) {
        if self.cfg.max_approx_entries > 0 {
            self.approx.record(replica, hashes, now);
        }
    }

    /// Per replica, the longest prefix of `hashes` it holds, stopping at its first miss:
    /// precise (events) and approximate (unexpired routing history at `now`) separately;
    /// and the run of blocks after it that the shared tier holds (computed only when the
    /// index knows of any shared block).
    pub fn match_prefix(&self, hashes: &[BlockHash], now: Millis) -> PrefixMatches {
        matching::match_prefix(
            &self.precise,
            &self.approx,
            &self.shared,
            &self.offloaded,
            hashes,
            now,
        )
    }

    /// Blocks known to be in the shared KV tier.
    pub fn shared_blocks(&self) -> usize {
        self.shared.len()
    }

    /// Blocks `replica` reports in its own offload tier.
    pub fn offload_blocks(&self, replica: ReplicaId) -> usize {
        self.offloaded.replica_blocks(replica)
    }

    /// Blocks the precise part says `replica` holds.
    pub fn precise_blocks(&self, replica: ReplicaId) -> usize {
        self.precise.replica_blocks(replica)
    }

    /// Unexpired blocks in `replica`'s routing history (O(approximate blocks)).
    pub fn approx_blocks(&self, replica: ReplicaId, now: Millis) -> usize {
        self.approx.replica_blocks(replica, now)
    }

    /// Where to resume `replica`'s stream from (`seq + 1`), if it has a valid position.
    pub fn cursor(&self, replica: ReplicaId) -> Option<(Epoch, SeqNo)> {
        self.cursors.get(&replica).and_then(StreamCursor::position)
    }

    /// Counters for metrics.
    pub fn stats(&self) -> IndexStats {
        IndexStats {
            precise_entries: self.precise.entries(),
            precise_blocks: self.precise.blocks(),
            approx_entries: self.approx.entries(),
            precise_evicted: self.precise.evicted(),
            subscribed_replicas: self
                .cursors
                .values()
                .filter(|c| c.position().is_some())
                .count(),
            shared_entries: self.shared.len(),
            shared_evicted: self.shared.evicted(),
        }
    }

    /// Heap bytes held by both parts (computed from capacities; validated by the bench's
    /// counting allocator).
    pub fn allocated_bytes(&self) -> usize {
        self.precise.allocated_bytes()
            + self.approx.allocated_bytes()
            + self.shared.allocated_bytes()
            + self.offloaded.allocated_bytes()
    }

    fn apply_snapshot(
        &mut self,
        replica: ReplicaId,
        epoch: Epoch,
        seq: SeqNo,
        hashes: &[BlockHash],
    ) {
        let cursor = self.cursors.entry(replica).or_default();
        let epoch_changed = cursor.position().is_some_and(|(e, _)| e != epoch);
        cursor.reset_to(epoch, seq);
        self.precise.clear_replica(replica);
        self.offloaded.clear_replica(replica);
        if epoch_changed {
            self.approx.clear_replica(replica);
        }
        for &h in hashes {
            self.precise.store(replica, h);
        }
    }

    /// Applies one event. Shared-tier events change the tier's set only: whoever wrote a
    /// block, it is the cluster's, and a replica's `cleared` or new epoch leaves it there.
    fn apply_event(&mut self, replica: ReplicaId, event: &KvEvent) {
        match event {
            KvEvent::Stored {
                hashes,
                tier: KvTier::Device,
                ..
            } => {
                for &h in hashes {
                    self.precise.store(replica, h);
                }
            }
            KvEvent::Stored {
                hashes,
                tier: KvTier::Shared,
                ..
            } => hashes.iter().for_each(|&h| self.shared.store(h)),
            KvEvent::Removed {
                hashes,
                tier: KvTier::Device,
            } => {
                for &h in hashes {
                    self.precise.remove(replica, h);
                }
            }
            KvEvent::Removed {
                hashes,
                tier: KvTier::Shared,
            } => hashes.iter().for_each(|&h| self.shared.remove(h)),
            KvEvent::Stored {
                hashes,
                tier: KvTier::Offload,
                ..
            } => hashes
                .iter()
                .for_each(|&h| self.offloaded.store(replica, h)),
            KvEvent::Removed {
                hashes,
                tier: KvTier::Offload,
            } => hashes
                .iter()
                .for_each(|&h| self.offloaded.remove(replica, h)),
            KvEvent::Cleared => self.drop_entries(replica),
        }
    }

    fn drop_entries(&mut self, replica: ReplicaId) {
        self.precise.clear_replica(replica);
        self.offloaded.clear_replica(replica);
        self.approx.clear_replica(replica);
    }
}

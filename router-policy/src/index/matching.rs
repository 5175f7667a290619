//! Longest-prefix matching over a request's hash chain.
//!
//! For each replica: the number of leading blocks it holds, stopping at its first miss. One
//! walk down the chain keeps the set of replicas still matching ("alive"); a replica leaves
//! the set at its first miss, and the walk stops as soon as nobody is left, so a cold
//! request costs one table lookup. Cost: O(matched depth x (alive + holders per block)).
//!
//! When the shared tier is known to hold anything, each replica also gets its tier run: the
//! consecutive blocks after its own match that the tier holds (what it could fetch rather
//! than compute). Runs are shared between replicas whose matches end inside the same run, so
//! this costs at most one tier lookup per block plus one per distinct match depth.
//!
//! When some replica reports an offload tier (vLLM's CPU or disk `medium`), a third walk
//! over device and offload holders together gives each replica its offload run: the
//! consecutive blocks after its own match that its offload tier holds
//! ([`PrefixMatches::offload_blocks`]).

use super::approx::{ApproxIndex, Holders};
use super::offload;
use super::precise::PreciseIndex;
use super::shared::SharedTier;
use crate::cluster::INLINE_REPLICAS;
use serde::Serialize;
use smallvec::SmallVec;
use warmpath_core::ids::{BlockHash, Millis, ReplicaId};

/// `(replica, matched blocks)` from one part of the index.
type Depths = SmallVec<[(ReplicaId, u32); INLINE_REPLICAS]>;

/// How much of a request's prefix one replica holds.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct ReplicaMatch {
    /// Leading blocks held according to the replica's own KV events.
    pub precise_blocks: u32,
    /// Leading blocks held according to the router's unexpired routing history.
    pub approx_blocks: u32,
    /// Consecutive blocks after [`ReplicaMatch::blocks`] that the shared tier holds (0 when
    /// the index knows of no shared block).
    pub tier_blocks: u32,
}

impl ReplicaMatch {
    /// The best estimate of cached leading blocks: the larger of the two parts.
    pub fn blocks(&self) -> u32 {
        self.precise_blocks.max(self.approx_blocks)
    }

    /// True when the estimate comes from the replica's events (precise covers the best part).
    pub fn is_precise(&self) -> bool {
        self.precise_blocks > 0 && self.precise_blocks >= self.approx_blocks
    }
}

/// Per-replica prefix matches of one request. Replicas not listed matched nothing.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct PrefixMatches {
    /// Sorted by replica id; only replicas with at least one matched block.
    entries: Vec<(ReplicaId, ReplicaMatch)>,
    /// Leading blocks the shared tier holds: the tier run of a replica not in `entries`.
    root_tier_blocks: u32,
    /// Sorted by replica id: the offload run of every replica that has one.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    offload: Vec<(ReplicaId, u32)>,
}

impl PrefixMatches {
    /// Blocks replica `r` could fetch from the shared tier: the consecutive run after its
    /// own match (for a replica that matched nothing, the tier's leading run).
    pub fn tier_blocks(&self, r: ReplicaId) -> u32 {
        match self.entries.binary_search_by_key(&r, |e| e.0) {
            Ok(i) => self.entries[i].1.tier_blocks,
            Err(_) => self.root_tier_blocks,
        }
    }

    /// Blocks replica `r` could load from its own offload tier (vLLM's CPU or disk
    /// `medium`): the consecutive run after its own match (0 when it reports none).
    pub fn offload_blocks(&self, r: ReplicaId) -> u32 {
        match self.offload.binary_search_by_key(&r, |e| e.0) {
            Ok(i) => self.offload[i].1,
            Err(_) => 0,
        }
    }

    /// True when some replica could fetch at least one block from the shared tier or its
    /// own offload tier.
    pub fn any_tier(&self) -> bool {
        self.root_tier_blocks > 0
            || !self.offload.is_empty()
            || self.entries.iter().any(|e| e.1.tier_blocks > 0)
    }

    /// The match of `r` (zero when it holds nothing).
    pub fn get(&self, r: ReplicaId) -> ReplicaMatch {
        match self.entries.binary_search_by_key(&r, |e| e.0) {
            Ok(i) => self.entries[i].1,
            Err(_) => ReplicaMatch::default(),
        }
    }

    /// Replicas with a non-empty match, by id.
    pub fn iter(&self) -> impl Iterator<Item = (ReplicaId, ReplicaMatch)> + '_ {
        self.entries.iter().copied()
    }

    /// Number of replicas with a non-empty match.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// True when no replica holds even the first block.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The deepest match over all replicas.
    pub fn max_blocks(&self) -> u32 {
        self.entries.iter().map(|e| e.1.blocks()).max().unwrap_or(0)
    }
}

/// Walks `hashes` over both parts, then (if the tier holds anything) finds tier runs.
pub(super) fn match_prefix(
    precise: &PreciseIndex,
    approx: &ApproxIndex,
    shared: &SharedTier,
    offloaded: &PreciseIndex,
    hashes: &[BlockHash],
    now: Millis,
) -> PrefixMatches {
    let mut p = Depths::new();
    walk(hashes, &mut p, |h, out| {
        if let Some(set) = precise.holders(h) {
            out.extend_from_slice(set.as_slice());
        }
    });
    let mut a = Depths::new();
    if approx.entries() > 0 {
        walk(hashes, &mut a, |h, out| approx.push_holders(h, now, out));
    }
    p.sort_unstable_by_key(|e| e.0);
    a.sort_unstable_by_key(|e| e.0);
    let mut out = PrefixMatches {
        entries: merge(&p, &a),
        root_tier_blocks: 0,
        offload: Vec::new(),
    };
    if !shared.is_empty() && !hashes.is_empty() {
        add_tier_runs(shared, hashes, &mut out);
    }
    if offloaded.blocks() > 0 {
        let mut both = Depths::new();
        walk(hashes, &mut both, |h, out| {
            offload::push_union(precise.holders(h), offloaded.holders(h), out)
        });
        both.sort_unstable_by_key(|e| e.0);
        out.offload = both
            .into_iter()
            .map(|(r, d)| (r, d.saturating_sub(out.get(r).blocks())))
            .filter(|e| e.1 > 0)
            .collect();
    }
    out
}

/// Fills every replica's tier run. A run found from position `a` ends at the tier's first
/// miss `e`; any later start `d` in `[a, e]` reuses it as `e - d` without a lookup.
fn add_tier_runs(shared: &SharedTier, hashes: &[BlockHash], out: &mut PrefixMatches) {
    let mut runs: SmallVec<[(u32, u32); INLINE_REPLICAS]> = SmallVec::new();
    let mut run_at = |d: u32| -> u32 {
        if let Some(&(_, e)) = runs.iter().find(|&&(a, e)| a <= d && d <= e) {
            return e - d;
        }
        let n = shared.run_from(hashes, d as usize);
        runs.push((d, d + n));
        n
    };
    out.root_tier_blocks = run_at(0);
    let len = hashes.len() as u32;
    for (_, m) in &mut out.entries {
        m.tier_blocks = run_at(m.blocks().min(len));
    }
}

/// Generic walk: `holders(h, out)` appends the sorted raw ids holding `h`. Pushes
/// `(replica, matched)` for every replica that holds `hashes[0]`.
fn walk(hashes: &[BlockHash], out: &mut Depths, mut holders: impl FnMut(BlockHash, &mut Holders)) {
    let Some((&first, rest)) = hashes.split_first() else {
        return;
    };
    let mut alive = Holders::new();
    holders(first, &mut alive);
    if alive.is_empty() {
        return;
    }
    let mut here = Holders::new();
    let mut next = Holders::new();
    for (i, &h) in rest.iter().enumerate() {
        let depth = i as u32 + 1;
        here.clear();
        holders(h, &mut here);
        if here == alive {
            continue;
        }
        // Sorted intersection: survivors go to `next`, the others stop at `depth`.
        next.clear();
        let mut j = 0;
        for &r in &alive {
            while j < here.len() && here[j] < r {
                j += 1;
            }
            if j < here.len() && here[j] == r {
                next.push(r);
            } else {
                out.push((ReplicaId(r), depth));
            }
        }
        std::mem::swap(&mut alive, &mut next);
        if alive.is_empty() {
            return;
        }
    }
    let full = hashes.len() as u32;
    out.extend(alive.iter().map(|&r| (ReplicaId(r), full)));
}

fn merge(p: &[(ReplicaId, u32)], a: &[(ReplicaId, u32)]) -> Vec<(ReplicaId, ReplicaMatch)> {
    let mut out = Vec::with_capacity(p.len() + a.len());
    let (mut i, mut j) = (0, 0);
    while i < p.len() || j < a.len() {
        let take_p = j >= a.len() || (i < p.len() && p[i].0 <= a[j].0);
        let take_a = i >= p.len() || (j < a.len() && a[j].0 <= p[i].0);
        let r = if take_p { p[i].0 } else { a[j].0 };
        let mut m = ReplicaMatch::default();
        if take_p {
            m.precise_blocks = p[i].1;
            i += 1;
        }
        if take_a {
            m.approx_blocks = a[j].1;
            j += 1;
        }
        out.push((r, m));
    }
    out
}

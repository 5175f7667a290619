//! Index tests: a reference model under random event streams, LRU bounds, TTL, epochs.

use super::*;
use proptest::prelude::*;
use proptest::test_runner::RngSeed;
use std::collections::{BTreeMap, HashSet};
use warmpath_core::events::KvEventRecord;

fn hs(v: &[u64]) -> Vec<BlockHash> {
    v.iter().copied().map(BlockHash).collect()
}

fn ev(epoch: u64, seq: u64, event: KvEvent) -> KvStreamMessage {
    KvStreamMessage::Event(KvEventRecord {
        epoch: Epoch(epoch),
        seq: SeqNo(seq),
        event,
    })
}

fn stored(v: &[u64]) -> KvEvent {
    KvEvent::Stored {
        parent: None,
        hashes: hs(v),
        tier: KvTier::Device,
    }
}

fn removed(v: &[u64]) -> KvEvent {
    KvEvent::Removed {
        hashes: hs(v),
        tier: KvTier::Device,
    }
}

fn snap(epoch: u64, seq: u64, v: &[u64]) -> KvStreamMessage {
    KvStreamMessage::Snapshot {
        epoch: Epoch(epoch),
        seq: SeqNo(seq),
        hashes: hs(v),
    }
}

fn big() -> IndexConfig {
    IndexConfig {
        max_precise_entries: 1 << 20,
        max_approx_entries: 1 << 20,
        approx_ttl: Millis(1000),
        max_shared_entries: 1 << 20,
    }
}

// ---------------------------------------------------------------- reference model

/// The obvious implementation: a hash set per replica and a hand-written cursor.
#[derive(Default)]
struct Model {
    held: BTreeMap<u32, HashSet<u64>>,
    /// None: needs a snapshot.
    pos: BTreeMap<u32, Option<(u64, u64)>>,
}

impl Model {
    fn apply(&mut self, r: u32, msg: &KvStreamMessage) -> Observation {
        match msg {
            KvStreamMessage::Snapshot { epoch, seq, hashes } => {
                self.held.insert(r, hashes.iter().map(|h| h.0).collect());
                self.pos.insert(r, Some((epoch.0, seq.0)));
                Observation::Apply
            }
            KvStreamMessage::Event(rec) => {
                let pos = self.pos.get(&r).copied().flatten();
                let (e, s) = (rec.epoch.0, rec.seq.0);
                match pos {
                    None => Observation::Gap {
                        expected: SeqNo(0),
                        got: rec.seq,
                    },
                    Some((pe, _)) if pe != e => {
                        self.held.remove(&r);
                        self.pos.insert(r, None);
                        Observation::NewEpoch
                    }
                    Some((_, ps)) if s <= ps => Observation::Duplicate,
                    Some((pe, ps)) if s == ps + 1 => {
                        self.pos.insert(r, Some((pe, s)));
                        let set = self.held.entry(r).or_default();
                        // Shared-tier events never make a replica a holder.
                        match &rec.event {
                            KvEvent::Stored {
                                hashes,
                                tier: KvTier::Device,
                                ..
                            } => set.extend(hashes.iter().map(|h| h.0)),
                            KvEvent::Removed {
                                hashes,
                                tier: KvTier::Device,
                            } => hashes.iter().for_each(|h| {
                                set.remove(&h.0);
                            }),
                            KvEvent::Stored { .. } | KvEvent::Removed { .. } => {}
                            KvEvent::Cleared => set.clear(),
                        }
                        Observation::Apply
                    }
                    Some((_, ps)) => Observation::Gap {
                        expected: SeqNo(ps + 1),
                        got: rec.seq,
                    },
                }
            }
        }
    }

    fn remove(&mut self, r: u32) {
        self.held.remove(&r);
        self.pos.remove(&r);
    }

    fn matches(&self, q: &[u64]) -> BTreeMap<u32, u32> {
        let mut out = BTreeMap::new();
        for (&r, set) in &self.held {
            let n = q.iter().take_while(|h| set.contains(h)).count() as u32;
            if n > 0 {
                out.insert(r, n);
            }
        }
        out
    }

    fn cursor(&self, r: u32) -> Option<(u64, u64)> {
        self.pos.get(&r).copied().flatten()
    }
}

#[derive(Clone, Debug)]
enum SeqMode {
    Next,
    Dup,
    Skip(u64),
}

#[derive(Clone, Debug)]
enum Op {
    Snapshot {
        r: u32,
        new_epoch: bool,
        seq: u64,
        hashes: Vec<u64>,
    },
    Event {
        r: u32,
        new_epoch: bool,
        seq: SeqMode,
        event: KvEvent,
    },
    Remove {
        r: u32,
    },
    Query(Vec<u64>),
}

const UNIVERSE: u64 = 24;

fn arb_hashes(max: usize) -> impl Strategy<Value = Vec<u64>> {
    prop_oneof![
        // A chain-like run of consecutive hashes (what engines store).
        (0..UNIVERSE, 1..max).prop_map(|(s, n)| (s..s + n as u64).map(|v| v % UNIVERSE).collect()),
        proptest::collection::vec(0..UNIVERSE, 0..max),
    ]
}

fn arb_event() -> impl Strategy<Value = KvEvent> {
    prop_oneof![
        5 => arb_hashes(8).prop_map(|v| stored(&v)),
        3 => arb_hashes(6).prop_map(|v| removed(&v)),
        1 => arb_hashes(8).prop_map(|v| KvEvent::Stored {
            parent: None,
            hashes: hs(&v),
            tier: KvTier::Shared,
        }),
        1 => arb_hashes(6).prop_map(|v| KvEvent::Removed {
            hashes: hs(&v),
            tier: KvTier::Shared,
        }),
        1 => Just(KvEvent::Cleared),
    ]
}

fn arb_op() -> impl Strategy<Value = Op> {
    let seq = prop_oneof![8 => Just(SeqMode::Next), 1 => Just(SeqMode::Dup), 1 => (2u64..4).prop_map(SeqMode::Skip)];
    prop_oneof![
        2 => (0u32..4, proptest::bool::weighted(0.3), 0u64..50, arb_hashes(12))
            .prop_map(|(r, new_epoch, seq, hashes)| Op::Snapshot { r, new_epoch, seq, hashes }),
        12 => (0u32..4, proptest::bool::weighted(0.05), seq, arb_event())
            .prop_map(|(r, new_epoch, seq, event)| Op::Event { r, new_epoch, seq, event }),
        1 => (0u32..4).prop_map(|r| Op::Remove { r }),
        4 => arb_hashes(10).prop_map(Op::Query),
    ]
}

fn check_same(index: &PrefixIndex, model: &Model, q: &[u64]) -> Result<(), TestCaseError> {
    let got: BTreeMap<u32, u32> = index
        .match_prefix(&hs(q), Millis(0))
        .iter()
        .map(|(r, m)| {
            assert_eq!(m.approx_blocks, 0, "no routing history was recorded");
            (r.0, m.precise_blocks)
        })
        .collect();
    prop_assert_eq!(got, model.matches(q), "query {:?}", q);
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 300, rng_seed: RngSeed::Fixed(0x5eed_1dec), ..ProptestConfig::default() })]

    /// The index equals the reference model under random snapshots, deltas, duplicates,
    /// gaps, epoch changes and replica removals (memory bound not reached).
    #[test]
    fn index_matches_reference_model(ops in proptest::collection::vec(arb_op(), 1..80)) {
        let mut index = PrefixIndex::new(big());
        let mut model = Model::default();
        let mut epochs: BTreeMap<u32, u64> = BTreeMap::new();
        for op in ops {
            match op {
                Op::Snapshot { r, new_epoch, seq, hashes } => {
                    let e = epochs.entry(r).or_insert(1);
                    if new_epoch { *e += 1; }
                    let msg = snap(*e, seq, &hashes);
                    prop_assert_eq!(index.apply_message(ReplicaId(r), &msg), model.apply(r, &msg));
                }
                Op::Event { r, new_epoch, seq, event } => {
                    let e = epochs.entry(r).or_insert(1);
                    if new_epoch { *e += 1; }
                    let last = model.cursor(r).map_or(0, |(_, s)| s);
                    let s = match seq {
                        SeqMode::Next => last + 1,
                        SeqMode::Dup => last,
                        SeqMode::Skip(k) => last + k,
                    };
                    let msg = ev(*e, s, event);
                    prop_assert_eq!(index.apply_message(ReplicaId(r), &msg), model.apply(r, &msg));
                }
                Op::Remove { r } => {
                    index.remove_replica(ReplicaId(r));
                    model.remove(r);
                }
                Op::Query(q) => check_same(&index, &model, &q)?,
            }
            for r in 0..4u32 {
                let n = model.held.get(&r).map_or(0, HashSet::len);
                prop_assert_eq!(index.precise_blocks(ReplicaId(r)), n);
                prop_assert_eq!(index.cursor(ReplicaId(r)).map(|(e, s)| (e.0, s.0)), model.cursor(r));
            }
            let total: usize = model.held.values().map(HashSet::len).sum();
            prop_assert_eq!(index.stats().precise_entries, total);
            // Every prefix of the whole universe, in order, as a long query.
            let all: Vec<u64> = (0..UNIVERSE).collect();
            check_same(&index, &model, &all)?;
        }
    }

    /// The approximate part: longest unexpired prefix per replica, stopping at the first miss.
    #[test]
    fn approx_matches_reference(
        recs in proptest::collection::vec((0u32..3, arb_hashes(8), 0u64..40), 1..30),
        queries in proptest::collection::vec((arb_hashes(10), 0u64..60), 1..10),
    ) {
        let ttl = 10u64;
        let mut index = PrefixIndex::new(IndexConfig { approx_ttl: Millis(ttl), ..big() });
        let mut recs = recs;
        recs.sort_by_key(|x| x.2); // time moves forward
        let mut model: Vec<(u32, u64, u64)> = Vec::new(); // (replica, hash, expires)
        for (r, hashes, t) in &recs {
            index.record_routed(ReplicaId(*r), &hs(hashes), Millis(*t));
            model.retain(|&(mr, mh, _)| !(mr == *r && hashes.contains(&mh)));
            model.extend(hashes.iter().map(|&x| (*r, x, t + ttl)));
        }
        let last = recs.last().map_or(0, |x| x.2);
        for (q, dt) in queries {
            let now = last + dt / 4;
            let got = index.match_prefix(&hs(&q), Millis(now));
            for r in 0..3u32 {
                let want = q
                    .iter()
                    .take_while(|&&x| model.iter().any(|&(mr, mh, exp)| mr == r && mh == x && exp > now))
                    .count() as u32;
                let m = got.get(ReplicaId(r));
                prop_assert_eq!(m.approx_blocks, want, "replica {} query {:?} now {}", r, q, now);
                prop_assert_eq!(m.precise_blocks, 0);
            }
        }
    }
}

// ---------------------------------------------------------------- unit tests

#[test]
fn longest_prefix_stops_at_first_miss_per_replica() {
    let mut idx = PrefixIndex::new(big());
    idx.apply_message(ReplicaId(0), &snap(1, 0, &[1, 2, 3, 4]));
    idx.apply_message(ReplicaId(1), &snap(1, 0, &[1, 2, 4, 5]));
    idx.apply_message(ReplicaId(2), &snap(1, 0, &[2, 3, 4]));
    let m = idx.match_prefix(&hs(&[1, 2, 3, 4, 5]), Millis(0));
    assert_eq!(m.get(ReplicaId(0)).precise_blocks, 4);
    assert_eq!(
        m.get(ReplicaId(1)).precise_blocks,
        2,
        "holds 4 and 5 but misses 3"
    );
    assert_eq!(
        m.get(ReplicaId(2)),
        ReplicaMatch::default(),
        "misses block 0"
    );
    assert_eq!(m.len(), 2);
    assert_eq!(m.max_blocks(), 4);
    assert!(idx.match_prefix(&[], Millis(0)).is_empty());
}

#[test]
fn new_epoch_and_removal_drop_entries_at_once() {
    let mut idx = PrefixIndex::new(big());
    let r = ReplicaId(3);
    assert_eq!(
        idx.apply_message(r, &snap(1, 10, &[1, 2, 3])),
        Observation::Apply
    );
    idx.record_routed(r, &hs(&[1, 2, 3, 4]), Millis(0));
    assert_eq!(
        idx.apply_message(r, &ev(1, 11, stored(&[4]))),
        Observation::Apply
    );
    assert_eq!(idx.precise_blocks(r), 4);
    assert_eq!(
        idx.apply_message(r, &ev(2, 1, stored(&[9]))),
        Observation::NewEpoch
    );
    assert_eq!(idx.precise_blocks(r), 0);
    assert_eq!(
        idx.approx_blocks(r, Millis(1)),
        0,
        "routing history of the old life dropped too"
    );
    assert!(idx.match_prefix(&hs(&[1]), Millis(1)).is_empty());
    assert_eq!(idx.cursor(r), None, "waits for a snapshot of the new epoch");
    assert!(matches!(
        idx.apply_message(r, &ev(2, 2, stored(&[9]))),
        Observation::Gap { .. }
    ));
    assert_eq!(
        idx.apply_message(r, &snap(2, 2, &[7, 8])),
        Observation::Apply
    );
    assert_eq!(
        idx.apply_message(r, &ev(2, 3, stored(&[9]))),
        Observation::Apply
    );
    assert_eq!(idx.precise_blocks(r), 3);
    idx.record_routed(r, &hs(&[7]), Millis(5));
    idx.remove_replica(r);
    assert_eq!(idx.precise_blocks(r), 0);
    assert_eq!(idx.stats().precise_entries, 0);
    assert_eq!(idx.stats().approx_entries, 0);
    assert_eq!(idx.cursor(r), None);
}

#[test]
fn gap_keeps_entries_and_applies_nothing_until_snapshot() {
    let mut idx = PrefixIndex::new(big());
    let r = ReplicaId(0);
    idx.apply_message(r, &snap(1, 0, &[1]));
    assert_eq!(
        idx.apply_message(r, &ev(1, 2, stored(&[2]))),
        Observation::Gap {
            expected: SeqNo(1),
            got: SeqNo(2)
        }
    );
    assert_eq!(idx.precise_blocks(r), 1);
    assert_eq!(
        idx.apply_message(r, &ev(1, 0, stored(&[3]))),
        Observation::Duplicate
    );
    assert_eq!(idx.precise_blocks(r), 1);
    assert_eq!(idx.cursor(r), Some((Epoch(1), SeqNo(0))));
}

#[test]
fn cleared_event_drops_the_replica_only() {
    let mut idx = PrefixIndex::new(big());
    idx.apply_message(ReplicaId(0), &snap(1, 0, &[1, 2]));
    idx.apply_message(ReplicaId(1), &snap(1, 0, &[1, 2]));
    assert_eq!(
        idx.apply_message(ReplicaId(0), &ev(1, 1, KvEvent::Cleared)),
        Observation::Apply
    );
    let m = idx.match_prefix(&hs(&[1, 2]), Millis(0));
    assert_eq!(m.get(ReplicaId(0)).blocks(), 0);
    assert_eq!(m.get(ReplicaId(1)).blocks(), 2);
    assert_eq!(idx.stats().precise_blocks, 2);
}

#[test]
fn precise_bound_evicts_least_recently_stored_blocks() {
    let mut idx = PrefixIndex::new(IndexConfig {
        max_precise_entries: 4,
        ..big()
    });
    let a = ReplicaId(0);
    let b = ReplicaId(1);
    idx.apply_message(a, &snap(1, 0, &[]));
    idx.apply_message(b, &snap(1, 0, &[]));
    idx.apply_message(a, &ev(1, 1, stored(&[1, 2, 3])));
    idx.apply_message(b, &ev(1, 1, stored(&[1])));
    // 4 pairs: (1,a) (2,a) (3,a) (1,b); block 1 is now the most recent.
    assert_eq!(idx.stats().precise_entries, 4);
    idx.apply_message(a, &ev(1, 2, stored(&[4])));
    // Over the bound by one: the least recently stored block (2) goes.
    let s = idx.stats();
    assert_eq!((s.precise_entries, s.precise_evicted), (4, 1));
    let m = idx.match_prefix(&hs(&[1, 2, 3, 4]), Millis(0));
    assert_eq!(m.get(a).precise_blocks, 1);
    assert_eq!(m.get(b).precise_blocks, 1);
    assert_eq!(
        idx.match_prefix(&hs(&[3, 4]), Millis(0))
            .get(a)
            .precise_blocks,
        2
    );
    assert_eq!(idx.precise_blocks(a), 3);
    // Evicting a shared block drops every holder's pair.
    idx.apply_message(a, &ev(1, 3, stored(&[5, 6])));
    let s = idx.stats();
    assert!(s.precise_entries <= 4, "{s:?}");
    assert_eq!(idx.precise_blocks(b), 0, "block 1 (shared) was the oldest");
    assert_eq!(
        idx.precise_blocks(a) + idx.precise_blocks(b),
        s.precise_entries
    );
}

#[test]
fn a_fresh_approx_record_is_renewed_only_once_its_slack_has_passed() {
    // TTL 12.8 s: the slack is 100 ms.
    let mut idx = PrefixIndex::new(IndexConfig {
        approx_ttl: Millis(12_800),
        ..big()
    });
    let (r, other) = (ReplicaId(0), ReplicaId(1));
    let held = |idx: &PrefixIndex, now| {
        idx.match_prefix(&hs(&[1, 2]), Millis(now))
            .get(r)
            .approx_blocks
    };
    idx.record_routed(r, &hs(&[1, 2]), Millis(0));
    // Within the slack: kept as it is, so it still expires at 12.8 s.
    idx.record_routed(r, &hs(&[1, 2]), Millis(99));
    assert_eq!(held(&idx, 12_799), 2);
    assert_eq!(held(&idx, 12_800), 0, "not renewed within the slack");
    // Past the slack: renewed.
    idx.record_routed(r, &hs(&[1, 2]), Millis(100));
    assert_eq!(held(&idx, 12_899), 2);
    assert_eq!(held(&idx, 12_900), 0);
    // Another replica's record of the same blocks is its own: recorded at once.
    idx.record_routed(other, &hs(&[1, 2]), Millis(102));
    let m = idx.match_prefix(&hs(&[1, 2]), Millis(12_900));
    assert_eq!(m.get(other).approx_blocks, 2);
    assert_eq!(idx.stats().approx_entries, 4);
}

#[test]
fn approx_expires_by_ttl_and_respects_its_bound() {
    let mut idx = PrefixIndex::new(IndexConfig {
        max_approx_entries: 6,
        approx_ttl: Millis(100),
        ..big()
    });
    let r = ReplicaId(0);
    idx.record_routed(r, &hs(&[1, 2, 3]), Millis(0));
    assert_eq!(
        idx.match_prefix(&hs(&[1, 2, 3]), Millis(99))
            .get(r)
            .approx_blocks,
        3
    );
    assert_eq!(
        idx.match_prefix(&hs(&[1, 2, 3]), Millis(100))
            .get(r)
            .approx_blocks,
        0
    );
    // A later record reclaims the expired blocks.
    idx.record_routed(r, &hs(&[7]), Millis(150));
    assert_eq!(idx.stats().approx_entries, 1);
    idx.record_routed(
        ReplicaId(1),
        &hs(&[10, 11, 12, 13, 14, 15, 16]),
        Millis(160),
    );
    assert!(idx.stats().approx_entries <= 6);
    let m = idx.match_prefix(&hs(&[7]), Millis(161));
    assert_eq!(
        m.get(r).approx_blocks,
        0,
        "oldest record evicted by the bound"
    );
    assert_eq!(
        idx.match_prefix(&hs(&[11, 12]), Millis(161))
            .get(ReplicaId(1))
            .approx_blocks,
        2
    );
}

#[test]
fn approx_and_precise_stay_separate() {
    let mut idx = PrefixIndex::new(big());
    let r = ReplicaId(0);
    idx.apply_message(r, &snap(1, 0, &[1]));
    idx.record_routed(r, &hs(&[1, 2, 3]), Millis(0));
    let m = idx.match_prefix(&hs(&[1, 2, 3]), Millis(1)).get(r);
    assert_eq!((m.precise_blocks, m.approx_blocks, m.blocks()), (1, 3, 3));
    assert!(!m.is_precise());
    // A removal event does not touch routing history, and vice versa.
    idx.apply_message(r, &ev(1, 1, removed(&[1])));
    let m = idx.match_prefix(&hs(&[1, 2, 3]), Millis(1)).get(r);
    assert_eq!((m.precise_blocks, m.approx_blocks), (0, 3));
}

#[test]
fn config_validation_and_serde() {
    assert!(IndexConfig::default().validate().is_ok());
    let bad = IndexConfig {
        max_precise_entries: 0,
        ..IndexConfig::default()
    };
    assert!(matches!(
        bad.validate(),
        Err(RouteError::InvalidConfig {
            key: "index.max_precise_entries",
            ..
        })
    ));
    let cfg: IndexConfig = serde_json::from_str(r#"{"approx_ttl": 5000}"#).unwrap();
    assert_eq!(cfg.approx_ttl, Millis(5000));
    assert_eq!(
        cfg.max_precise_entries,
        IndexConfig::default().max_precise_entries
    );
    assert!(serde_json::from_str::<IndexConfig>(r#"{"ttl": 5}"#).is_err());
}

#[test]
fn many_blocks_round_trip() {
    let mut idx = PrefixIndex::new(big());
    let chain: Vec<u64> = (1000..1512).collect();
    for r in 0..8u32 {
        let depth = 64 * (r as usize + 1);
        idx.apply_message(ReplicaId(r), &snap(1, 0, &chain[..depth]));
    }
    let m = idx.match_prefix(&hs(&chain), Millis(0));
    for r in 0..8u32 {
        assert_eq!(m.get(ReplicaId(r)).precise_blocks, 64 * (r + 1));
    }
    assert_eq!(idx.stats().precise_blocks, 512);
    assert_eq!(
        idx.stats().precise_entries,
        (1..=8).map(|k| 64 * k).sum::<usize>()
    );
    assert!(idx.allocated_bytes() > 0);
}

#[test]
fn the_last_replica_of_a_checkpoint_leaving_drops_its_entries() {
    use warmpath_core::hash::{block_hashes, HashNamespace};
    use warmpath_core::ids::{BlockSize, CheckpointId, TokenId};
    // One prompt hashed under two checkpoints: the chains share nothing.
    let toks: Vec<TokenId> = (0..128).map(TokenId).collect();
    let chain = |c: &str| {
        let seed = HashNamespace::new(CheckpointId::new(c)).root_seed();
        block_hashes(seed, &toks, BlockSize(16))
    };
    let (old, new) = (chain("m@old"), chain("m@new"));
    assert!(old.iter().all(|h| !new.contains(h)));
    let mut idx = PrefixIndex::new(big());
    let snapshot = |hashes: &[BlockHash]| KvStreamMessage::Snapshot {
        epoch: Epoch(1),
        seq: SeqNo(0),
        hashes: hashes.to_vec(),
    };
    // Replicas 0 and 1 serve the old checkpoint (events and routing history), 2 the new.
    idx.apply_message(ReplicaId(0), &snapshot(&old));
    idx.apply_message(ReplicaId(1), &snapshot(&old[..4]));
    idx.record_routed(ReplicaId(1), &old, Millis(0));
    idx.apply_message(ReplicaId(2), &snapshot(&new));
    assert_eq!(idx.stats().precise_blocks, 16);
    idx.remove_replica(ReplicaId(0));
    assert_eq!(
        idx.match_prefix(&old, Millis(1)).get(ReplicaId(1)).blocks(),
        8
    );
    idx.remove_replica(ReplicaId(1));
    let m = idx.match_prefix(&old, Millis(1));
    assert_eq!(
        m.get(ReplicaId(0)).blocks() + m.get(ReplicaId(1)).blocks(),
        0
    );
    let s = idx.stats();
    assert_eq!(
        s.precise_blocks, 8,
        "only the new checkpoint's blocks remain"
    );
    assert_eq!(s.precise_entries, 8);
    assert_eq!(
        s.approx_entries, 0,
        "routing history of the old checkpoint dropped too"
    );
    assert_eq!(
        idx.match_prefix(&new, Millis(1)).get(ReplicaId(2)).blocks(),
        8
    );
}

//! The prefix index's shared-tier part: fed by `tier: shared` events of any replica, bounded,
//! and matched as per-replica runs after each replica's own match.

use router_policy::{IndexConfig, PrefixIndex};
use warmpath_core::{
    BlockHash, Epoch, KvEvent, KvEventRecord, KvStreamMessage, KvTier, Millis, ReplicaId, SeqNo,
};

fn hs(r: std::ops::Range<u64>) -> Vec<BlockHash> {
    r.map(BlockHash).collect()
}

fn snapshot(idx: &mut PrefixIndex, r: u32, hashes: &[BlockHash]) {
    let msg = KvStreamMessage::Snapshot {
        epoch: Epoch(1),
        seq: SeqNo(0),
        hashes: hashes.to_vec(),
    };
    idx.apply_message(ReplicaId(r), &msg);
}

fn event(idx: &mut PrefixIndex, r: u32, seq: u64, event: KvEvent) {
    let msg = KvStreamMessage::Event(KvEventRecord {
        epoch: Epoch(1),
        seq: SeqNo(seq),
        event,
    });
    idx.apply_message(ReplicaId(r), &msg);
}

fn shared(hashes: Vec<BlockHash>) -> KvEvent {
    KvEvent::Stored {
        parent: None,
        hashes,
        tier: KvTier::Shared,
    }
}

#[test]
fn tier_runs_start_after_each_replicas_own_match() {
    let chain = hs(0..60);
    let mut idx = PrefixIndex::default();
    snapshot(&mut idx, 0, &chain[..10]);
    snapshot(&mut idx, 1, &chain[..50]);
    snapshot(&mut idx, 2, &[]);
    snapshot(&mut idx, 3, &chain[..25]);
    let m = idx.match_prefix(&chain, Millis(0));
    assert!(!m.any_tier());
    assert_eq!(m.tier_blocks(ReplicaId(2)), 0);
    // The tier holds blocks 0..40 (written by replica 2, which stays a non-holder).
    event(&mut idx, 2, 1, shared(chain[..40].to_vec()));
    assert_eq!(idx.shared_blocks(), 40);
    assert_eq!(idx.stats().shared_entries, 40);
    assert_eq!(idx.precise_blocks(ReplicaId(2)), 0);
    let m = idx.match_prefix(&chain, Millis(0));
    assert!(m.any_tier());
    assert_eq!(m.get(ReplicaId(0)).blocks(), 10);
    assert_eq!(m.tier_blocks(ReplicaId(0)), 30);
    assert_eq!(m.tier_blocks(ReplicaId(3)), 15);
    assert_eq!(
        m.tier_blocks(ReplicaId(1)),
        0,
        "its match ends past the tier's run"
    );
    assert_eq!(m.tier_blocks(ReplicaId(2)), 40);
    assert_eq!(
        m.tier_blocks(ReplicaId(9)),
        40,
        "unknown replicas start at the root"
    );
    assert_eq!(m.max_blocks(), 50, "device matching is unchanged");
    // The tier evicts block 20: runs stop there.
    event(
        &mut idx,
        1,
        1,
        KvEvent::Removed {
            hashes: vec![chain[20]],
            tier: KvTier::Shared,
        },
    );
    let m = idx.match_prefix(&chain, Millis(0));
    assert_eq!(m.tier_blocks(ReplicaId(0)), 10);
    assert_eq!(m.tier_blocks(ReplicaId(3)), 15, "21..40 from its depth 25");
    assert_eq!(m.tier_blocks(ReplicaId(2)), 20);
    // A shared removal is no device eviction: replica 1 still holds its 50 blocks.
    assert_eq!(m.get(ReplicaId(1)).blocks(), 50);
}

#[test]
fn a_replicas_clear_or_new_epoch_leaves_the_tier_alone() {
    let chain = hs(100..108);
    let mut idx = PrefixIndex::default();
    snapshot(&mut idx, 0, &chain);
    event(&mut idx, 0, 1, shared(chain.clone()));
    event(&mut idx, 0, 2, KvEvent::Cleared);
    assert_eq!(idx.precise_blocks(ReplicaId(0)), 0);
    assert_eq!(idx.shared_blocks(), 8);
    idx.remove_replica(ReplicaId(0));
    assert_eq!(idx.shared_blocks(), 8);
    let m = idx.match_prefix(&chain, Millis(0));
    assert_eq!(m.tier_blocks(ReplicaId(0)), 8);
}

#[test]
fn the_shared_set_is_bounded_and_zero_turns_it_off() {
    let mut idx = PrefixIndex::new(IndexConfig {
        max_shared_entries: 100,
        ..IndexConfig::default()
    });
    snapshot(&mut idx, 0, &[]);
    event(&mut idx, 0, 1, shared(hs(0..250)));
    let st = idx.stats();
    assert_eq!((st.shared_entries, st.shared_evicted), (100, 150));
    // The most recently stored survive.
    let m = idx.match_prefix(&hs(150..250), Millis(0));
    assert_eq!(m.tier_blocks(ReplicaId(0)), 100);
    assert_eq!(
        idx.match_prefix(&hs(0..10), Millis(0))
            .tier_blocks(ReplicaId(0)),
        0
    );
    let mut off = PrefixIndex::new(IndexConfig {
        max_shared_entries: 0,
        ..IndexConfig::default()
    });
    snapshot(&mut off, 0, &[]);
    event(&mut off, 0, 1, shared(hs(0..10)));
    assert_eq!(off.shared_blocks(), 0);
    let bad = IndexConfig {
        max_shared_entries: usize::MAX,
        ..IndexConfig::default()
    };
    assert!(bad.validate().is_err());
}

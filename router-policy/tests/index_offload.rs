//! A replica's own offload tier (`tier: offload`, vLLM's CPU or disk `medium`): indexed per
//! replica apart from its device blocks, matched as the run after its device match, removed
//! only by removals from that tier, and costed by `warm` like a shared-tier fetch.

use router_policy::policy::{Policy, RouteRequest, Warm, WarmConfig};
use router_policy::{ClusterView, PrefixIndex, ReplicaSnapshot};
use warmpath_core::{
    block_hashes, BlockHash, BlockSize, CheckpointId, Epoch, HashNamespace, KvEvent, KvEventRecord,
    KvStreamMessage, KvTier, Millis, ReplicaId, SeqNo, TokenId,
};

const BS: u32 = 16;
const BLOCKS: usize = 32;

fn ck() -> CheckpointId {
    CheckpointId::new("m@1")
}

fn chain() -> Vec<BlockHash> {
    let toks: Vec<TokenId> = (0..BLOCKS as u32 * BS)
        .map(|i| TokenId(i * 31 % 40_000))
        .collect();
    block_hashes(HashNamespace::new(ck()).root_seed(), &toks, BlockSize(BS))
}

/// Feeds `replica`'s stream: an empty snapshot, then `events` numbered from 1.
fn feed(index: &mut PrefixIndex, replica: u32, events: Vec<KvEvent>) {
    let r = ReplicaId(replica);
    index.apply_message(
        r,
        &KvStreamMessage::Snapshot {
            epoch: Epoch(1),
            seq: SeqNo(0),
            hashes: Vec::new(),
        },
    );
    for (i, event) in events.into_iter().enumerate() {
        let rec = KvEventRecord {
            epoch: Epoch(1),
            seq: SeqNo(i as u64 + 1),
            event,
        };
        index.apply_message(r, &KvStreamMessage::Event(rec));
    }
}

fn stored(hashes: &[BlockHash], tier: KvTier) -> KvEvent {
    KvEvent::Stored {
        parent: None,
        hashes: hashes.to_vec(),
        tier,
    }
}

fn removed(hashes: &[BlockHash], tier: KvTier) -> KvEvent {
    KvEvent::Removed {
        hashes: hashes.to_vec(),
        tier,
    }
}

#[test]
fn offload_blocks_extend_the_device_match_and_leave_with_their_own_removals() {
    let c = chain();
    let mut idx = PrefixIndex::default();
    // GPU holds 8 blocks, the CPU tier all 32 (vLLM's offload keeps copies).
    feed(
        &mut idx,
        0,
        vec![stored(&c[..8], KvTier::Device), stored(&c, KvTier::Offload)],
    );
    let m = idx.match_prefix(&c, Millis(0));
    assert_eq!(m.get(ReplicaId(0)).precise_blocks, 8);
    assert_eq!(
        m.offload_blocks(ReplicaId(0)),
        24,
        "the run after the device match"
    );
    assert_eq!(m.offload_blocks(ReplicaId(1)), 0);
    assert!(m.any_tier());
    assert_eq!(idx.offload_blocks(ReplicaId(0)), 32);
    assert_eq!(
        idx.precise_blocks(ReplicaId(0)),
        8,
        "offload blocks are not device blocks"
    );

    // A device removal leaves the offload copies: the whole chain is now an offload run.
    let mut idx2 = PrefixIndex::default();
    feed(
        &mut idx2,
        0,
        vec![
            stored(&c[..8], KvTier::Device),
            stored(&c, KvTier::Offload),
            removed(&c[..8], KvTier::Device),
        ],
    );
    let m = idx2.match_prefix(&c, Millis(0));
    assert_eq!(m.get(ReplicaId(0)).blocks(), 0);
    assert_eq!(m.offload_blocks(ReplicaId(0)), 32);

    // An offload removal leaves the device blocks; a hole in the offload run ends it.
    let mut idx3 = PrefixIndex::default();
    feed(
        &mut idx3,
        0,
        vec![
            stored(&c[..8], KvTier::Device),
            stored(&c, KvTier::Offload),
            removed(&c[..4], KvTier::Offload),
            removed(&c[20..21], KvTier::Offload),
        ],
    );
    let m = idx3.match_prefix(&c, Millis(0));
    assert_eq!(m.get(ReplicaId(0)).precise_blocks, 8, "device untouched");
    assert_eq!(m.offload_blocks(ReplicaId(0)), 12, "blocks 8..20");

    // `cleared` drops both tiers of the replica.
    idx3.apply_message(
        ReplicaId(0),
        &KvStreamMessage::Event(KvEventRecord {
            epoch: Epoch(1),
            seq: SeqNo(5),
            event: KvEvent::Cleared,
        }),
    );
    let m = idx3.match_prefix(&c, Millis(0));
    assert_eq!(m.get(ReplicaId(0)).blocks(), 0);
    assert_eq!(m.offload_blocks(ReplicaId(0)), 0);
    assert_eq!(idx3.offload_blocks(ReplicaId(0)), 0);
}

#[test]
fn warm_prefers_the_replica_with_the_prefix_offloaded_over_a_recompute() {
    let (ck, c) = (ck(), chain());
    let mut idx = PrefixIndex::default();
    feed(&mut idx, 0, vec![stored(&c, KvTier::Offload)]);
    feed(&mut idx, 1, vec![]);
    let req = RouteRequest {
        checkpoint: &ck,
        hashes: &c,
        prompt_tokens: BLOCKS as u32 * BS + 5,
        block_size: BlockSize(BS),
        now: Millis(0),
        regions: None,
        residency: &[],
    };
    let rep = |i: u32| ReplicaSnapshot {
        prefill_tokens_per_s: 4000.0,
        ..ReplicaSnapshot::idle(ReplicaId(i), ck.clone())
    };
    // Replica 1 first: a tie would go to it by order, so only the fetch term decides.
    let view = ClusterView::new(vec![rep(1), rep(0)]);
    let d = Warm::new(WarmConfig::default())
        .select(&req, &view, &idx)
        .unwrap();
    assert_eq!(d.replica, ReplicaId(0), "{:#?}", d.explanation);
    let holder = d.explanation.candidate(ReplicaId(0)).unwrap();
    assert_eq!(holder.terms.get("tier_blocks"), Some(BLOCKS as f64));
    // 2 ms lookup + 512 tokens at the default 20k tokens/s, then 5 tokens of prefill.
    let fetch = holder.terms.get("fetch_ms").unwrap();
    assert!((fetch - (2.0 + 512.0 / 20.0)).abs() < 1e-9, "{fetch}");
    let cold = d.explanation.candidate(ReplicaId(1)).unwrap();
    assert!(
        cold.cost_ms > holder.cost_ms + 100.0,
        "{cold:?} vs {holder:?}"
    );
}

//! `warm` with a shared KV tier: a replica that can fetch the prefix from the tier competes
//! with the replica that holds it, at the tier's measured (or default) rate; other policies
//! are not confused by shared-tier events.

use router_policy::policy::{Policy, RouteRequest, Warm, WarmConfig};
use router_policy::{Branch, ClusterView, PolicyConfig, PrefixIndex, ReplicaSnapshot};
use warmpath_core::{
    block_hashes, BlockHash, BlockSize, CheckpointId, Epoch, HashNamespace, KvEvent, KvEventRecord,
    KvStreamMessage, KvTier, Millis, ReplicaId, SeqNo, TokenId,
};

const BS: u32 = 16;
/// Full blocks of the test prompt.
const BLOCKS: usize = 64;
/// Prefill rate of both replicas, tokens/s.
const RATE: f64 = 4000.0;

fn ck() -> CheckpointId {
    CheckpointId::new("m@1")
}

fn prompt_chain() -> Vec<BlockHash> {
    let seed = HashNamespace::new(ck()).root_seed();
    let toks: Vec<TokenId> = (0..(BLOCKS as u32) * BS)
        .map(|i| TokenId(i.wrapping_mul(7919) % 50_000))
        .collect();
    block_hashes(seed, &toks, BlockSize(BS))
}

fn req<'a>(c: &'a CheckpointId, hashes: &'a [BlockHash]) -> RouteRequest<'a> {
    RouteRequest {
        checkpoint: c,
        hashes,
        prompt_tokens: hashes.len() as u32 * BS + 7,
        block_size: BlockSize(BS),
        now: Millis(0),
        regions: None,
        residency: &[],
    }
}

/// Replica 0 holds the prefix and has `holder_queue_tokens` queued; replica 1 is idle.
fn view(holder_queue_tokens: u64, tier_rate: f64) -> ClusterView {
    let rep = |i: u32| ReplicaSnapshot {
        prefill_tokens_per_s: RATE,
        tier_tokens_per_s: tier_rate,
        ..ReplicaSnapshot::idle(ReplicaId(i), ck())
    };
    let mut v = ClusterView::new(vec![rep(0), rep(1)]);
    v.replicas[0].queued_prefill_tokens = holder_queue_tokens;
    v.replicas[0].running = 1;
    v
}

fn snapshot(index: &mut PrefixIndex, r: u32, hashes: &[BlockHash]) {
    let msg = KvStreamMessage::Snapshot {
        epoch: Epoch(1),
        seq: SeqNo(0),
        hashes: hashes.to_vec(),
    };
    index.apply_message(ReplicaId(r), &msg);
}

fn shared_stored(index: &mut PrefixIndex, r: u32, seq: u64, hashes: &[BlockHash]) {
    let msg = KvStreamMessage::Event(KvEventRecord {
        epoch: Epoch(1),
        seq: SeqNo(seq),
        event: KvEvent::Stored {
            parent: None,
            hashes: hashes.to_vec(),
            tier: KvTier::Shared,
        },
    });
    index.apply_message(ReplicaId(r), &msg);
}

/// Replica 0 holds the chain on its device; with `tier`, replica 0 also wrote it to the
/// shared tier.
fn index(chain: &[BlockHash], tier: bool) -> PrefixIndex {
    let mut idx = PrefixIndex::default();
    snapshot(&mut idx, 0, chain);
    snapshot(&mut idx, 1, &[]);
    if tier {
        shared_stored(&mut idx, 0, 1, chain);
    }
    idx
}

fn warm() -> Warm {
    Warm::new(WarmConfig::default())
}

// The holder's queue: 1600 tokens = 400 ms. Computing the whole prompt on the idle replica
// costs ~258 ms of prefill plus ~256 ms of recompute charge (more than 400 ms), fetching it
// at 20k tokens/s ~53 ms.
const HOLDER_QUEUE: u64 = 1600;

#[test]
fn an_idle_replica_that_can_fetch_the_prefix_beats_a_busy_holder() {
    let (c, chain) = (ck(), prompt_chain());
    let idx = index(&chain, true);
    let m = idx.match_prefix(&chain, Millis(0));
    assert_eq!(
        m.get(ReplicaId(1)).blocks(),
        0,
        "a tier writer is no holder"
    );
    assert_eq!(m.tier_blocks(ReplicaId(1)), BLOCKS as u32);
    assert_eq!(
        m.tier_blocks(ReplicaId(0)),
        0,
        "nothing left after a full match"
    );
    let d = warm()
        .select(&req(&c, &chain), &view(HOLDER_QUEUE, 0.0), &idx)
        .unwrap();
    assert_eq!(d.replica, ReplicaId(1), "{:#?}", d.explanation);
    assert_eq!(d.explanation.branch, Branch::LowestCost);
    let fetcher = d.explanation.candidate(ReplicaId(1)).unwrap();
    let fetch_ms = fetcher.terms.get("fetch_ms").unwrap();
    // 2 ms lookup + 1024 tokens at the default 20k tokens/s.
    assert!(
        (fetch_ms - (2.0 + 1024.0 / 20.0)).abs() < 1e-9,
        "{fetch_ms}"
    );
    assert_eq!(fetcher.terms.get("tier_blocks"), Some(BLOCKS as f64));
    assert!(
        fetcher.terms.get("prefill_ms").unwrap() < 2.0,
        "7 tokens left"
    );
    let holder = d.explanation.candidate(ReplicaId(0)).unwrap();
    assert_eq!(holder.terms.get("fetch_ms"), Some(0.0));
    assert!(holder.cost_ms > fetcher.cost_ms + 150.0);
}

#[test]
fn without_the_tier_the_busy_holder_keeps_its_prefix() {
    let (c, chain) = (ck(), prompt_chain());
    let idx = index(&chain, false);
    assert!(!idx.match_prefix(&chain, Millis(0)).any_tier());
    let d = warm()
        .select(&req(&c, &chain), &view(HOLDER_QUEUE, 0.0), &idx)
        .unwrap();
    assert_eq!(d.replica, ReplicaId(0), "{:#?}", d.explanation);
    assert_eq!(d.explanation.branch, Branch::CacheHit);
    // No tier in play: the explanation keeps its old terms.
    let c1 = d.explanation.candidate(ReplicaId(1)).unwrap();
    assert_eq!(c1.terms.get("fetch_ms"), None);
}

#[test]
fn a_slow_measured_tier_rate_makes_the_fetch_lose() {
    let (c, chain) = (ck(), prompt_chain());
    let idx = index(&chain, true);
    // 1000 tokens/s measured: fetching 1024 tokens takes over a second.
    let d = warm()
        .select(&req(&c, &chain), &view(HOLDER_QUEUE, 1000.0), &idx)
        .unwrap();
    assert_eq!(d.replica, ReplicaId(0), "{:#?}", d.explanation);
    let fetcher = d.explanation.candidate(ReplicaId(1)).unwrap();
    assert!(fetcher.terms.get("fetch_ms").unwrap() > 1000.0);
    // The configured default applies only while unmeasured; a slow default also loses.
    let slow = WarmConfig {
        default_tier_tokens_per_s: 1000.0,
        ..WarmConfig::default()
    };
    let d = Warm::new(slow)
        .select(&req(&c, &chain), &view(HOLDER_QUEUE, 0.0), &idx)
        .unwrap();
    assert_eq!(d.replica, ReplicaId(0));
}

#[test]
fn a_partial_holder_fetches_the_rest_after_its_own_match() {
    let (c, chain) = (ck(), prompt_chain());
    let mut idx = PrefixIndex::default();
    snapshot(&mut idx, 0, &chain);
    snapshot(&mut idx, 1, &chain[..16]);
    shared_stored(&mut idx, 0, 1, &chain[..40]);
    let m = idx.match_prefix(&chain, Millis(0));
    assert_eq!(m.get(ReplicaId(1)).blocks(), 16);
    assert_eq!(m.tier_blocks(ReplicaId(1)), 24);
    let d = warm()
        .select(&req(&c, &chain), &view(HOLDER_QUEUE, 0.0), &idx)
        .unwrap();
    let r1 = d.explanation.candidate(ReplicaId(1)).unwrap();
    assert_eq!(r1.terms.get("tier_blocks"), Some(24.0));
    // 24 blocks fetched, 24 blocks + 7 tokens computed.
    let want_prefill = (24.0 * 16.0 + 7.0) / (RATE / 1000.0);
    assert!((r1.terms.get("prefill_ms").unwrap() - want_prefill).abs() < 1e-9);
}

#[test]
fn cache_aware_still_follows_device_holders_with_shared_events_present() {
    let (c, chain) = (ck(), prompt_chain());
    let mut idx = PrefixIndex::default();
    snapshot(&mut idx, 0, &chain);
    snapshot(&mut idx, 1, &[]);
    snapshot(&mut idx, 2, &[]);
    // Replicas 1 and 2 write the whole chain (and more) to the tier.
    shared_stored(&mut idx, 1, 1, &chain);
    shared_stored(&mut idx, 2, 1, &chain[..8]);
    assert_eq!(idx.shared_blocks(), BLOCKS);
    let mut v = view(0, 0.0);
    v.replicas[0].running = 0;
    v.replicas
        .push(ReplicaSnapshot::idle(ReplicaId(2), c.clone()));
    let mut p = PolicyConfig::from_name("cache_aware").unwrap().build();
    for _ in 0..3 {
        let d = p.select(&req(&c, &chain), &v, &idx).unwrap();
        assert_eq!(d.replica, ReplicaId(0));
        assert_eq!(d.predicted_cached_blocks, BLOCKS as u32);
        for r in [1, 2] {
            let cand = d.explanation.candidate(ReplicaId(r)).unwrap();
            assert_eq!(cand.matched_blocks, 0, "replica {r} is no holder");
        }
    }
}

//! Replica model tests: the step timeline, prefix reuse and eviction, tier imports.

use super::*;
use warmpath_core::KvTier;

fn profile(cap: u64) -> CostProfile {
    CostProfile {
        name: "t".into(),
        source: "test".into(),
        block_size: 4,
        kv_capacity_blocks: cap,
        prefill_tokens_per_s: 1000.0,
        prefill_step_overhead_ms: 0.0,
        decode_step_ms: vec![(1, 10.0), (2, 12.0)],
        max_batch: 4,
        max_prefill_tokens_per_step: 8,
        kv_bytes_per_token: None,
    }
}

fn chain(xs: &[u64]) -> Arc<[BlockHash]> {
    xs.iter().map(|&x| BlockHash(x)).collect::<Vec<_>>().into()
}

/// Runs the replica to idle; returns (completed seqs, events) with the clock.
fn drain(r: &mut Replica, p: &CostProfile, now: &mut f64) -> (Vec<Seq>, Vec<KvEvent>) {
    let (mut done, mut ev) = (Vec::new(), Vec::new());
    while let Some(ms) = r.plan_step(p, &mut ev) {
        *now += ms;
        let o = r.finish_step(*now);
        done.extend(o.completed);
        ev.extend(o.events);
    }
    (done, ev)
}

#[test]
fn chunked_prefill_then_decode_timeline() {
    let p = profile(100);
    let mut r = Replica::new(&p, PrefillOrder::Fcfs);
    // 12 prompt tokens (3 full blocks), 3 output tokens.
    r.waiting
        .push_back(Seq::new(Job::Request(0), chain(&[1, 2, 3]), 12, 3, 0.0));
    let mut now = 0.0;
    let (done, ev) = drain(&mut r, &p, &mut now);
    // Prefill 8 tokens (8 ms) + 4 tokens (4 ms): first token at 12 ms; two decode steps of 10 ms.
    let s = &done[0];
    assert_eq!(s.first_token_ms, 12.0);
    assert_eq!(s.last_token_ms, 32.0);
    assert_eq!(s.itls, vec![10.0, 10.0]);
    assert_eq!(
        ev,
        vec![KvEvent::Stored {
            parent: None,
            hashes: chain(&[1, 2, 3]).to_vec(),
            tier: KvTier::Device,
        }]
    );
    assert_eq!(r.reserved(), 0);
    assert_eq!(r.cache.cached_blocks(), 3);
}

#[test]
fn cached_prefix_is_reused_and_lru_evicts_to_admit() {
    let p = profile(8);
    let mut r = Replica::new(&p, PrefillOrder::Fcfs);
    let mut now = 0.0;
    r.waiting
        .push_back(Seq::new(Job::Request(0), chain(&[1, 2, 3]), 12, 1, 0.0));
    drain(&mut r, &p, &mut now);
    // Same 2-block prefix, 12 tokens: 2 blocks hit (8 tokens cached), 4 to prefill.
    r.waiting
        .push_back(Seq::new(Job::Request(1), chain(&[1, 2, 4]), 12, 1, now));
    let (done, ev) = drain(&mut r, &p, &mut now);
    assert_eq!(done[0].cached_blocks, 2);
    assert_eq!(
        ev,
        vec![KvEvent::Stored {
            parent: Some(BlockHash(2)),
            hashes: vec![BlockHash(4)],
            tier: KvTier::Device,
        }]
    );
    // A fully cached prompt still computes its last block.
    r.waiting
        .push_back(Seq::new(Job::Request(2), chain(&[1, 2, 4]), 12, 1, now));
    let (done, _) = drain(&mut r, &p, &mut now);
    assert_eq!(done[0].cached_blocks, 2);
    // A cold 6-block prompt needs 6 + 1 blocks: LRU leaves go first (3, then 4, ...).
    r.waiting.push_back(Seq::new(
        Job::Request(3),
        chain(&[7, 8, 9, 10, 11, 12]),
        24,
        1,
        now,
    ));
    let (_, ev) = drain(&mut r, &p, &mut now);
    let KvEvent::Removed { hashes, .. } = &ev[0] else {
        panic!("expected a removal first: {ev:?}")
    };
    assert_eq!(hashes[0], BlockHash(3));
    assert!(r.used_blocks() <= 8);
}

#[test]
fn tier_import_caches_only_the_loaded_run_and_counts_as_a_hit() {
    let p = profile(100);
    let mut r = Replica::new(&p, PrefillOrder::Fcfs);
    let mut now = 0.0;
    // 4 full blocks + 2 tokens; the tier delivered blocks 0..3 (the fourth is computed).
    let mut seq = Seq::new(Job::Request(0), chain(&[1, 2, 3, 4]), 18, 1, 0.0);
    assert_eq!(r.local_hit(&seq.hashes, seq.prompt_tokens), (0, 4));
    let mut ev = Vec::new();
    assert_eq!(r.import(&mut seq, 3, &mut ev), 3);
    assert_eq!(
        ev,
        vec![KvEvent::Stored {
            parent: None,
            hashes: chain(&[1, 2, 3]).to_vec(),
            tier: KvTier::Device,
        }]
    );
    assert_eq!(r.local_hit(&seq.hashes, seq.prompt_tokens), (3, 4));
    r.waiting.push_back(seq);
    let (done, ev) = drain(&mut r, &p, &mut now);
    assert_eq!(done[0].cached_blocks, 3);
    // 6 tokens computed: one 6 ms chunk, not 18 ms.
    assert_eq!(done[0].first_token_ms, 6.0);
    assert_eq!(
        ev,
        vec![KvEvent::Stored {
            parent: Some(BlockHash(3)),
            hashes: vec![BlockHash(4)],
            tier: KvTier::Device,
        }]
    );
    assert_eq!(r.cache.cached_blocks(), 4);
}

#[test]
fn shortest_order_serves_a_short_prompt_beside_a_long_prefill_first() {
    // A 40-token prompt prefills 8 tokens a step (8 ms); a 4-token prompt arrives after two
    // steps. FCFS: the short one waits for the long prefill. Shortest: it takes the next
    // step alone (4 ms), and the long one finishes one short step later.
    let p = profile(100);
    let mut got = Vec::new();
    for order in [PrefillOrder::Fcfs, PrefillOrder::default()] {
        let mut r = Replica::new(&p, order);
        let mut now = 0.0;
        let long = chain(&[1, 2, 3, 4, 5, 6, 7, 8, 9, 10]);
        r.enqueue(Seq::new(Job::Request(0), long, 40, 1, 0.0));
        let mut ev = Vec::new();
        for _ in 0..2 {
            now += r.plan_step(&p, &mut ev).unwrap();
            assert!(r.finish_step(now).completed.is_empty());
        }
        r.enqueue(Seq::new(Job::Request(1), chain(&[20]), 4, 1, now));
        let (done, _) = drain(&mut r, &p, &mut now);
        let ttft = |job| {
            done.iter()
                .find(|s| s.job == job)
                .map(|s| s.first_token_ms)
                .unwrap()
        };
        got.push((ttft(Job::Request(0)), ttft(Job::Request(1))));
    }
    assert_eq!(got, vec![(40.0, 44.0), (44.0, 20.0)]);
}

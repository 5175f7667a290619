//! Policy tests: invariants for every policy (property tests), then per-policy behaviour.

use super::*;
use crate::cluster::{ClusterView, Health, ReplicaSnapshot};
use crate::decision::{Branch, Decision};
use crate::index::IndexConfig;
use crate::index::PrefixIndex;
use proptest::prelude::*;
use proptest::test_runner::RngSeed;
use warmpath_core::events::{Epoch, KvStreamMessage, SeqNo};
use warmpath_core::ids::{BlockHash, BlockSize, CheckpointId, Millis, ReplicaId, TokenId};

const B: BlockSize = BlockSize(16);

mod adapter;
mod region;
mod warm;

fn ck(s: &str) -> CheckpointId {
    CheckpointId::new(s)
}

fn chain(tag: u32, blocks: usize) -> Vec<BlockHash> {
    let seed = warmpath_core::hash::HashNamespace::new(ck("m@1")).root_seed();
    let toks: Vec<TokenId> = (0..blocks as u32 * 16)
        .map(|i| TokenId(i.wrapping_mul(31) ^ tag))
        .collect();
    warmpath_core::hash::block_hashes(seed, &toks, B)
}

fn req<'a>(checkpoint: &'a CheckpointId, hashes: &'a [BlockHash]) -> RouteRequest<'a> {
    RouteRequest {
        checkpoint,
        hashes,
        prompt_tokens: hashes.len() as u32 * 16 + 7,
        block_size: B,
        now: Millis(0),
        regions: None,
        residency: &[],
    }
}

fn idle(n: u32) -> ClusterView {
    ClusterView::new(
        (0..n)
            .map(|i| ReplicaSnapshot::idle(ReplicaId(i), ck("m@1")))
            .collect(),
    )
}

fn snapshot(index: &mut PrefixIndex, r: u32, hashes: &[BlockHash]) {
    index.apply_message(
        ReplicaId(r),
        &KvStreamMessage::Snapshot {
            epoch: Epoch(1),
            seq: SeqNo(0),
            hashes: hashes.to_vec(),
        },
    );
}

/// Every candidate's cost is the sum of its `_ms` terms.
fn assert_costs_are_their_terms(d: &Decision) {
    for cand in &d.explanation.candidates {
        let sum: f64 = cand
            .terms
            .iter()
            .filter(|t| t.0.ends_with("_ms"))
            .map(|t| t.1)
            .sum();
        assert!((cand.cost_ms - sum).abs() < 1e-9, "{cand:?}");
    }
}

fn all_configs() -> Vec<PolicyConfig> {
    POLICY_NAMES
        .iter()
        .map(|n| PolicyConfig::from_name(n).unwrap())
        .collect()
}

// ---------------------------------------------------------------- invariants (proptest)

fn arb_replica(id: u32) -> impl Strategy<Value = ReplicaSnapshot> {
    (
        prop_oneof![6 => Just(Health::Healthy), 1 => Just(Health::Unhealthy), 1 => Just(Health::Draining)],
        prop_oneof![5 => Just("m@1"), 1 => Just("m@2")],
        (0u32..20, 0u32..20, 0u64..50_000, 0u32..40),
        (0u64..1200, prop_oneof![Just(0u64), Just(1000u64)], prop_oneof![Just(0.0), 500.0..50_000.0f64]),
    )
        .prop_map(move |(health, c, (running, waiting, queued, in_flight), (kv_used, cap, rate))| ReplicaSnapshot {
            id: ReplicaId(id),
            health,
            checkpoint: ck(c),
            region: None,
            running,
            waiting,
            queued_prefill_tokens: queued,
            in_flight,
            kv_used_blocks: kv_used.min(cap.max(1)),
            kv_capacity_blocks: cap,
            prefill_tokens_per_s: rate,
            tier_tokens_per_s: 0.0,
            role: Default::default(),
            adapter: Default::default(),
        })
}

fn arb_view() -> impl Strategy<Value = ClusterView> {
    (1u32..12).prop_flat_map(|n| {
        (0..n)
            .map(arb_replica)
            .collect::<Vec<_>>()
            .prop_map(ClusterView::new)
    })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 200, rng_seed: RngSeed::Fixed(42), ..ProptestConfig::default() })]

    /// Every policy: never an unhealthy replica or one serving another checkpoint; fallbacks
    /// are eligible, distinct and exclude the choice; the explanation lists every eligible
    /// replica; no eligible replica is an error.
    #[test]
    fn every_policy_respects_health_and_checkpoint(
        view in arb_view(),
        held in proptest::collection::vec((0u32..12, 0usize..24), 0..12),
        routed in proptest::collection::vec((0u32..12, 0usize..24), 0..6),
        depth in 0usize..24,
    ) {
        let hashes = chain(1, depth);
        let mut index = PrefixIndex::new(IndexConfig::default());
        for (r, d) in held {
            snapshot(&mut index, r, &hashes[..d.min(depth)]);
        }
        for (r, d) in routed {
            index.record_routed(ReplicaId(r), &hashes[..d.min(depth)], Millis(0));
        }
        let c = ck("m@1");
        let eligible: Vec<ReplicaId> = view.eligible(&c).iter().map(|r| r.id).collect();
        for cfg in all_configs() {
            let mut p = cfg.build();
            for _ in 0..3 {
                match p.select(&req(&c, &hashes), &view, &index) {
                    Ok(d) => {
                        prop_assert!(eligible.contains(&d.replica), "{} chose {:?}", p.name(), d.replica);
                        prop_assert!(!d.fallbacks.contains(&d.replica));
                        prop_assert!(d.fallbacks.iter().all(|f| eligible.contains(f)));
                        let mut f = d.fallbacks.clone();
                        f.sort();
                        f.dedup();
                        prop_assert_eq!(f.len(), d.fallbacks.len());
                        prop_assert_eq!(d.fallbacks.len(), (eligible.len() - 1).min(MAX_FALLBACKS));
                        let listed: Vec<ReplicaId> = d.explanation.candidates.iter().map(|c| c.replica).collect();
                        prop_assert_eq!(&listed, &eligible);
                        prop_assert_eq!(d.explanation.policy, p.name());
                        let m = index.match_prefix(&hashes, Millis(0)).get(d.replica).blocks();
                        prop_assert_eq!(d.predicted_cached_blocks, m.min(depth as u32));
                        prop_assert!(d.explanation.candidates.iter().all(|c| !c.cost_ms.is_nan()));
                    }
                    Err(e) => {
                        prop_assert!(eligible.is_empty(), "{} failed with {:?}", p.name(), e);
                        let is_no_eligible = matches!(e, RouteError::NoEligibleReplica { .. });
                        prop_assert!(is_no_eligible);
                    }
                }
            }
        }
    }

    /// consistent_hash with arrivals only: after every placement no replica holds more than
    /// ceil((1 + eps) x average) outstanding requests.
    #[test]
    fn consistent_hash_bounded_load(n in 1u32..16, eps in 0.05f64..1.0, keys in proptest::collection::vec(0u32..6, 1..300)) {
        let cfg = ConsistentHashConfig { prefix_blocks: 2, load_eps: eps };
        let mut p = ConsistentHash::new(cfg);
        let mut view = idle(n);
        let index = PrefixIndex::new(IndexConfig::default());
        let c = ck("m@1");
        let chains: Vec<Vec<BlockHash>> = (0..6).map(|k| chain(k, 3)).collect();
        for (placed, k) in keys.iter().enumerate() {
            let d = p.select(&req(&c, &chains[*k as usize]), &view, &index).unwrap();
            let r = view.replicas.iter_mut().find(|r| r.id == d.replica).unwrap();
            r.in_flight += 1;
            let total = placed as f64 + 1.0;
            let bound = ((1.0 + eps) * total / f64::from(n)).ceil() as u32;
            let max = view.replicas.iter().map(|r| r.in_flight).max().unwrap();
            prop_assert!(max <= bound, "max {} > bound {} after {} placements", max, bound, total);
        }
    }
}

// ---------------------------------------------------------------- configs

#[test]
fn configs_parse_validate_and_name() {
    assert_eq!(PolicyConfig::default().name(), "warm");
    for name in POLICY_NAMES {
        let cfg = PolicyConfig::from_name(name).unwrap();
        assert_eq!(cfg.name(), *name);
        assert_eq!(cfg.build().name(), *name);
        cfg.validate().unwrap();
        let json = serde_json::to_string(&cfg).unwrap();
        assert_eq!(
            serde_json::from_str::<PolicyConfig>(&json).unwrap(),
            cfg,
            "{json}"
        );
    }
    assert!(matches!(
        PolicyConfig::from_name("fastest"),
        Err(RouteError::UnknownPolicy(_))
    ));
    let warm: PolicyConfig =
        serde_json::from_str(r#"{"type":"warm","spread_queue_gap_ms":250}"#).unwrap();
    let PolicyConfig::Warm(w) = &warm else {
        panic!("not warm: {warm:?}")
    };
    assert_eq!(w.spread_queue_gap_ms, 250.0);
    assert_eq!(
        w.home_prefix_blocks,
        WarmConfig::default().home_prefix_blocks
    );
    assert!(serde_json::from_str::<PolicyConfig>(r#"{"type":"warm","nope":1}"#).is_err());
    assert!(serde_json::from_str::<PolicyConfig>(r#"{"type":"random","seed":3}"#).is_ok());
    // (serde cannot reject extra keys next to the tag of a unit variant like round_robin.)
    assert!(serde_json::from_str::<PolicyConfig>(r#"{"type":"random","seed":3,"x":1}"#).is_err());
    let bad = PolicyConfig::LeastLoaded(LeastLoadedConfig {
        choices: 0,
        seed: 0,
    });
    assert!(matches!(
        bad.validate(),
        Err(RouteError::InvalidConfig {
            key: "least_loaded.choices",
            ..
        })
    ));
    let bad = PolicyConfig::Warm(WarmConfig {
        kv_pressure_threshold: 1.5,
        ..WarmConfig::default()
    });
    assert!(bad.validate().is_err());
    let bad = PolicyConfig::CacheAware(CacheAwareConfig {
        cache_threshold: f64::NAN,
        ..CacheAwareConfig::default()
    });
    assert!(bad.validate().is_err());
}

// ---------------------------------------------------------------- simple policies

#[test]
fn round_robin_cycles_over_eligible_only() {
    let mut view = idle(4);
    view.replicas[2].health = Health::Unhealthy;
    let index = PrefixIndex::default();
    let c = ck("m@1");
    let h = chain(0, 2);
    let mut p = RoundRobin::new();
    let got: Vec<u32> = (0..6)
        .map(|_| p.select(&req(&c, &h), &view, &index).unwrap().replica.0)
        .collect();
    assert_eq!(got, vec![0, 1, 3, 0, 1, 3]);
}

#[test]
fn random_is_seeded_and_uniform() {
    let view = idle(4);
    let index = PrefixIndex::default();
    let c = ck("m@1");
    let h = chain(0, 2);
    let run = |seed| {
        let mut p = RandomPolicy::new(seed);
        (0..400)
            .map(|_| p.select(&req(&c, &h), &view, &index).unwrap().replica.0)
            .collect::<Vec<_>>()
    };
    assert_eq!(run(9), run(9));
    assert_ne!(run(9), run(10));
    let counts = run(9).iter().fold([0u32; 4], |mut a, &r| {
        a[r as usize] += 1;
        a
    });
    assert!(counts.iter().all(|&c| c > 60), "{counts:?}");
}

#[test]
fn least_loaded_with_full_choice_takes_the_minimum() {
    let mut view = idle(5);
    for (i, r) in view.replicas.iter_mut().enumerate() {
        r.in_flight = [7, 3, 9, 1, 4][i];
    }
    let index = PrefixIndex::default();
    let c = ck("m@1");
    let h = chain(0, 2);
    let mut p = LeastLoaded::new(LeastLoadedConfig {
        choices: 5,
        seed: 1,
    });
    for _ in 0..10 {
        assert_eq!(
            p.select(&req(&c, &h), &view, &index).unwrap().replica,
            ReplicaId(3)
        );
    }
    // d = 2 never picks the most loaded replica (it always has a lighter partner).
    let mut p = LeastLoaded::new(LeastLoadedConfig {
        choices: 2,
        seed: 1,
    });
    for _ in 0..50 {
        assert_ne!(
            p.select(&req(&c, &h), &view, &index).unwrap().replica,
            ReplicaId(2)
        );
    }
}

#[test]
fn consistent_hash_is_sticky_per_prefix_and_overflows_when_loaded() {
    let mut view = idle(6);
    let index = PrefixIndex::default();
    let c = ck("m@1");
    let mut p = ConsistentHash::new(ConsistentHashConfig::default());
    let a = chain(5, 20);
    let mut b = a[..16].to_vec();
    b.extend(chain(6, 4)); // same first 16 blocks, different tail
    let da = p.select(&req(&c, &a), &view, &index).unwrap();
    let db = p.select(&req(&c, &b), &view, &index).unwrap();
    assert_eq!(da.replica, db.replica);
    assert_eq!(da.explanation.branch, Branch::ConsistentHash);
    view.replicas[da.replica.0 as usize].in_flight = 50;
    let d = p.select(&req(&c, &a), &view, &index).unwrap();
    assert_ne!(d.replica, da.replica);
    assert_eq!(d.explanation.branch, Branch::ConsistentHashOverflow);
}

// ---------------------------------------------------------------- cache_aware and kv_cost

#[test]
fn cache_aware_follows_smg_thresholds() {
    let mut view = idle(3);
    let mut index = PrefixIndex::default();
    let c = ck("m@1");
    let h = chain(1, 10);
    snapshot(&mut index, 2, &h[..8]); // 128 of 167 tokens: rate 0.77 > 0.3
    snapshot(&mut index, 1, &h[..1]); // 16 / 167 < 0.3
    let mut p = CacheAware::new(CacheAwareConfig::default());
    let d = p.select(&req(&c, &h), &view, &index).unwrap();
    assert_eq!(
        (d.replica, d.explanation.branch, d.predicted_cached_blocks),
        (ReplicaId(2), Branch::CacheHit, 8)
    );
    assert_eq!(d.fallbacks[0], ReplicaId(1), "next-best cache holder first");
    // Below the threshold: least loaded, ties to the lowest id (SMG behaviour).
    let short = chain(9, 10);
    snapshot(&mut index, 2, &short[..2]);
    view.replicas[0].in_flight = 1;
    let d = p.select(&req(&c, &short), &view, &index).unwrap();
    assert_eq!(
        (d.replica, d.explanation.branch),
        (ReplicaId(1), Branch::LeastLoaded)
    );
    // Imbalance overrides affinity: max - min > 64 and max > 1.5 x min.
    view.replicas[2].in_flight = 100;
    view.replicas[0].in_flight = 10;
    view.replicas[1].in_flight = 20;
    let d = p.select(&req(&c, &h), &view, &index).unwrap();
    assert_eq!(
        (d.replica, d.explanation.branch),
        (ReplicaId(0), Branch::Imbalanced)
    );
}

#[test]
fn kv_cost_is_dynamos_linear_formula() {
    let mut view = idle(2);
    view.replicas[0].queued_prefill_tokens = 160; // 10 blocks
    view.replicas[0].kv_used_blocks = 5;
    view.replicas[1].kv_used_blocks = 30;
    let mut index = PrefixIndex::default();
    let c = ck("m@1");
    let h = chain(2, 20);
    snapshot(&mut index, 0, &h[..12]);
    let r = RouteRequest {
        prompt_tokens: 320,
        ..req(&c, &h)
    }; // 20 blocks
    let d = KvCost::new(KvCostConfig::default())
        .select(&r, &view, &index)
        .unwrap();
    let c0 = d.explanation.candidate(ReplicaId(0)).unwrap();
    let c1 = d.explanation.candidate(ReplicaId(1)).unwrap();
    // r0: prefill = 10 + 20 - 12 = 18, decode = 5 + 20 = 25; r1: prefill 20, decode 50.
    assert_eq!((c0.cost_ms, c1.cost_ms), (43.0, 70.0));
    assert_eq!(c0.terms.get("prefill_blocks"), Some(18.0));
    assert_eq!(
        (d.replica, d.explanation.branch),
        (ReplicaId(0), Branch::CacheHit)
    );
}

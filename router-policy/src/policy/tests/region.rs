//! Regions: residency is never violated by any policy in any mode; `local` stays home;
//! `warm` spills only when the remote prediction plus RTT wins by the margin, and says why.

use super::*;
use crate::region::{RegionMode, Regions, SpillReason};
use warmpath_core::ids::RegionId;

fn regions(mode: RegionMode) -> Regions {
    Regions::new(RegionId::new("eu"), mode)
        .with_rtt("eu", "us", 70.0)
        .with_rtt("eu", "ap", 140.0)
        .with_rtt("us", "ap", 140.0)
}

/// Two replicas in `eu` (ids 0, 1) and two in `us` (2, 3), idle, measured at 4000 tokens/s.
fn two_regions() -> ClusterView {
    ClusterView::new(
        (0..4)
            .map(|i| ReplicaSnapshot {
                region: Some(RegionId::new(if i < 2 { "eu" } else { "us" })),
                prefill_tokens_per_s: 4000.0,
                ..ReplicaSnapshot::idle(ReplicaId(i), ck("m@1"))
            })
            .collect(),
    )
}

fn in_region<'a>(
    c: &'a CheckpointId,
    h: &'a [BlockHash],
    g: &'a Regions,
    residency: &'a [RegionId],
) -> RouteRequest<'a> {
    RouteRequest {
        regions: Some(g),
        residency,
        ..req(c, h)
    }
}

fn region_of(view: &ClusterView, id: ReplicaId) -> Option<&str> {
    view.get(id)
        .and_then(|r| r.region.as_ref())
        .map(RegionId::as_str)
}

const LABELS: [Option<&str>; 4] = [Some("eu"), Some("us"), Some("ap"), None];

proptest! {
    #![proptest_config(ProptestConfig { cases: 300, rng_seed: RngSeed::Fixed(7), ..ProptestConfig::default() })]

    /// Every policy in every mode: the choice and every fallback are in the tenant's
    /// residency; `local` picks home when home has an eligible replica.
    #[test]
    fn residency_is_never_violated_and_local_stays_home(
        view in arb_view(),
        labels in proptest::collection::vec(0usize..4, 12),
        pin in proptest::collection::vec(0usize..3, 0..3),
        mode in prop_oneof![Just(RegionMode::Global), Just(RegionMode::Local), Just(RegionMode::Spill)],
        held in proptest::collection::vec((0u32..12, 0usize..24), 0..12),
        depth in 0usize..24,
    ) {
        let mut view = view;
        for (r, l) in view.replicas.iter_mut().zip(&labels) {
            r.region = LABELS[*l].map(RegionId::new);
        }
        let residency: Vec<RegionId> = pin.iter().map(|i| RegionId::new(LABELS[*i].unwrap())).collect();
        let hashes = chain(3, depth);
        let mut index = PrefixIndex::new(IndexConfig::default());
        for (r, d) in held {
            snapshot(&mut index, r, &hashes[..d.min(depth)]);
        }
        let c = ck("m@1");
        let g = regions(mode);
        let allowed = |id: ReplicaId| {
            residency.is_empty()
                || region_of(&view, id).is_some_and(|x| residency.iter().any(|p| p.as_str() == x))
        };
        let home_eligible = view.eligible(&c).iter().any(|r| {
            allowed(r.id) && r.region.as_ref().is_none_or(|x| x.as_str() == "eu")
        });
        for cfg in all_configs() {
            let mut p = cfg.build();
            match p.select(&in_region(&c, &hashes, &g, &residency), &view, &index) {
                Ok(d) => {
                    prop_assert!(allowed(d.replica), "{}: {:?} outside {:?}", cfg.name(), d.replica, residency);
                    for f in &d.fallbacks {
                        prop_assert!(allowed(*f), "{}: fallback {f:?} outside residency", cfg.name());
                    }
                    if mode == RegionMode::Local && home_eligible {
                        let home = region_of(&view, d.replica).is_none_or(|x| x == "eu");
                        prop_assert!(home, "{}: local mode left home", cfg.name());
                    }
                }
                Err(RouteError::NoEligibleReplica { .. }) => {
                    prop_assert!(!view.eligible(&c).iter().any(|r| allowed(r.id)));
                }
                Err(e) => prop_assert!(false, "{e}"),
            }
        }
    }
}

#[test]
fn warm_spills_an_overloaded_home_and_names_the_reason() {
    let c = ck("m@1");
    let h = chain(40, 8);
    let index = PrefixIndex::default();
    let g = regions(RegionMode::Spill);
    let mut view = two_regions();
    // Home queues 2 s of prefill on each replica; the us replicas are idle 70 ms away.
    for r in &mut view.replicas[..2] {
        r.queued_prefill_tokens = 8000;
    }
    let d = Warm::new(WarmConfig::default())
        .select(&in_region(&c, &h, &g, &[]), &view, &index)
        .unwrap();
    assert_eq!(region_of(&view, d.replica), Some("us"));
    let note = d.explanation.region.as_ref().unwrap();
    assert_eq!(note.spilled_to, Some(RegionId::new("us")));
    assert_eq!(note.reason, Some(SpillReason::Overloaded));
    assert_eq!(note.rtt_ms, 70.0);
    assert!(note.local_ttft_ms > 1900.0, "{note:?}");
    let rtt = d
        .explanation
        .candidate(d.replica)
        .unwrap()
        .terms
        .get("rtt_ms");
    assert_eq!(rtt, Some(70.0));
    // A light home queue (30 ms): the saving no longer covers RTT + margin; stays home.
    for r in &mut view.replicas[..2] {
        r.queued_prefill_tokens = 120;
    }
    let d = Warm::new(WarmConfig::default())
        .select(&in_region(&c, &h, &g, &[]), &view, &index)
        .unwrap();
    assert_eq!(region_of(&view, d.replica), Some("eu"));
    let note = d.explanation.region.as_ref().unwrap();
    assert_eq!(note.spilled_to, None);
    assert!(note.remote_ttft_ms >= 70.0);
}

#[test]
fn warm_spills_for_a_much_longer_remote_prefix_unless_the_rtt_eats_it() {
    let c = ck("m@1");
    let h = chain(41, 128); // 2 k tokens: 512 ms to prefill at 4000 tokens/s
    let mut index = PrefixIndex::default();
    snapshot(&mut index, 3, &h);
    let view = two_regions();
    let near = regions(RegionMode::Spill);
    let d = Warm::new(WarmConfig::default())
        .select(&in_region(&c, &h, &near, &[]), &view, &index)
        .unwrap();
    assert_eq!(d.replica, ReplicaId(3));
    let note = d.explanation.region.as_ref().unwrap();
    assert_eq!(note.reason, Some(SpillReason::WarmerPrefix));
    // 600 ms away: recomputing at home is faster.
    let far = Regions::new(RegionId::new("eu"), RegionMode::Spill).with_rtt("eu", "us", 600.0);
    let d = Warm::new(WarmConfig::default())
        .select(&in_region(&c, &h, &far, &[]), &view, &index)
        .unwrap();
    assert_eq!(region_of(&view, d.replica), Some("eu"));
    assert_eq!(d.explanation.region.as_ref().unwrap().spilled_to, None);
    // The same prefix under `local`: never leaves, and no regional note.
    let local = regions(RegionMode::Local);
    let d = Warm::new(WarmConfig::default())
        .select(&in_region(&c, &h, &local, &[]), &view, &index)
        .unwrap();
    assert_eq!(region_of(&view, d.replica), Some("eu"));
    assert!(d.explanation.region.is_none());
}

#[test]
fn a_pinned_tenant_stays_pinned_even_when_home_is_drowning() {
    let c = ck("m@1");
    let h = chain(42, 64);
    let mut index = PrefixIndex::default();
    snapshot(&mut index, 2, &h);
    let mut view = two_regions();
    for r in &mut view.replicas[..2] {
        r.queued_prefill_tokens = 400_000;
    }
    let g = regions(RegionMode::Spill);
    let eu = [RegionId::new("eu")];
    for cfg in all_configs() {
        let d = cfg
            .build()
            .select(&in_region(&c, &h, &g, &eu), &view, &index)
            .unwrap();
        assert_eq!(region_of(&view, d.replica), Some("eu"), "{}", cfg.name());
        assert!(d.fallbacks.iter().all(|f| f.0 < 2), "{}", cfg.name());
    }
    // Pinned to a region with no replica: refused, not spilled.
    let ap = [RegionId::new("ap")];
    let err = Warm::new(WarmConfig::default())
        .select(&in_region(&c, &h, &g, &ap), &view, &index)
        .unwrap_err();
    assert!(matches!(err, RouteError::NoEligibleReplica { .. }));
}

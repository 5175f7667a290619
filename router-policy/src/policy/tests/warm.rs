//! `warm`: cold placement, holder affinity, recompute charge, hot-prefix spreading, KV pressure.

use super::*;

fn warm() -> Warm {
    Warm::new(WarmConfig::default())
}

#[test]
fn warm_cold_prefix_goes_home_and_independent_gateways_agree() {
    let view = idle(8);
    let c = ck("m@1");
    let mut homes = std::collections::HashSet::new();
    for tag in 0..40 {
        let h = chain(100 + tag, 12);
        // Two gateways: separate policy instances and separate (empty) indexes.
        let d1 = warm()
            .select(&req(&c, &h), &view, &PrefixIndex::default())
            .unwrap();
        let d2 = warm()
            .select(&req(&c, &h), &view, &PrefixIndex::default())
            .unwrap();
        assert_eq!(d1.replica, d2.replica);
        assert_eq!(d1.explanation.branch, Branch::ColdHome);
        assert_eq!(d1.predicted_cached_blocks, 0);
        homes.insert(d1.replica);
        // Requests sharing the first home_prefix_blocks blocks share the home.
        let mut sibling = h[..4].to_vec();
        sibling.extend(chain(7, 3));
        assert_eq!(
            warm()
                .select(&req(&c, &sibling), &view, &PrefixIndex::default())
                .unwrap()
                .replica,
            d1.replica
        );
    }
    assert!(
        homes.len() >= 6,
        "40 prefixes should spread over most of 8 replicas: {homes:?}"
    );
}

#[test]
fn warm_places_cold_prompts_by_queued_prefill_tokens_not_request_counts() {
    let c = ck("m@1");
    let h = chain(3, 8);
    let mut view = idle(3);
    let home = warm()
        .select(&req(&c, &h), &view, &PrefixIndex::default())
        .unwrap()
        .replica;
    let others: Vec<usize> = (0..3).filter(|&i| i != home.0 as usize).collect();
    // The home has one request, but a long prefill queued (1 s at 4000 tok/s); one other
    // replica runs many short decodes with nothing to prefill, the last a shorter prefill.
    view.replicas[home.0 as usize].running = 1;
    view.replicas[home.0 as usize].queued_prefill_tokens = 4000;
    view.replicas[others[0]].running = 9;
    view.replicas[others[1]].running = 1;
    view.replicas[others[1]].queued_prefill_tokens = 1000;
    let d = warm()
        .select(&req(&c, &h), &view, &PrefixIndex::default())
        .unwrap();
    assert_eq!(
        (d.replica, d.explanation.branch),
        (ReplicaId(others[0] as u32), Branch::ColdHome)
    );
    // Queues within the cold tie window: the home wins again (gateways agree).
    view.replicas[others[0]].queued_prefill_tokens = 4000;
    view.replicas[others[1]].queued_prefill_tokens = 4010;
    let d = warm()
        .select(&req(&c, &h), &view, &PrefixIndex::default())
        .unwrap();
    assert_eq!(d.replica, home);
}

#[test]
fn warm_prefers_the_holder_and_explains_the_cost() {
    let view = idle(4);
    let mut index = PrefixIndex::default();
    let c = ck("m@1");
    let h = chain(4, 64); // 1024 + 7 tokens
    snapshot(&mut index, 1, &h[..60]);
    snapshot(&mut index, 3, &h[..20]);
    let d = warm().select(&req(&c, &h), &view, &index).unwrap();
    assert_eq!(
        (d.replica, d.explanation.branch, d.predicted_cached_blocks),
        (ReplicaId(1), Branch::CacheHit, 60)
    );
    assert_eq!(d.fallbacks[0], ReplicaId(3), "next-best holder first");
    let c1 = d.explanation.candidate(ReplicaId(1)).unwrap();
    // 1031 - 960 = 71 uncached tokens at the default 4000 tok/s; the deepest pays no charge.
    assert!((c1.terms.get("prefill_ms").unwrap() - 71.0 / 4.0).abs() < 1e-9);
    assert_eq!(c1.terms.get("recompute_ms"), Some(0.0));
    // Replica 3 recomputes 40 blocks more than replica 1: charged 640 tokens of prefill.
    let c3 = d.explanation.candidate(ReplicaId(3)).unwrap();
    assert!((c3.terms.get("recompute_ms").unwrap() - 640.0 / 4.0).abs() < 1e-9);
    assert_costs_are_their_terms(&d);
    assert!(c1.precise);
}

#[test]
fn warm_holder_with_a_short_queue_beats_an_idle_non_holder() {
    // A shared 2048-token system prompt plus a 128-token question; the holder has one cold
    // prompt's prefill queued (550 ms at 4000 tok/s), every other replica is idle.
    let mut view = idle(4);
    let mut index = PrefixIndex::default();
    let c = ck("m@1");
    let h = chain(11, 136);
    snapshot(&mut index, 2, &h[..128]);
    view.replicas[2].running = 1;
    view.replicas[2].queued_prefill_tokens = 2200;
    let d = warm().select(&req(&c, &h), &view, &index).unwrap();
    assert_eq!(
        (d.replica, d.explanation.branch, d.predicted_cached_blocks),
        (ReplicaId(2), Branch::CacheHit, 128)
    );
    // Predicted TTFT alone (no recompute charge, no tie window) would leave the holder:
    // 550 + 34 ms there against 546 ms of full recompute on an idle replica.
    let ttft_only = WarmConfig {
        recompute_weight: 0.0,
        tie_tolerance_ms: 0.0,
        ..WarmConfig::default()
    };
    let d = Warm::new(ttft_only.clone())
        .select(&req(&c, &h), &view, &index)
        .unwrap();
    assert_eq!(d.explanation.branch, Branch::LowestCost);
    assert_eq!(d.predicted_cached_blocks, 0);
    // The tie window alone keeps it on the holder too.
    let tie_only = WarmConfig {
        tie_tolerance_ms: 150.0,
        ..ttft_only
    };
    let d = Warm::new(tie_only)
        .select(&req(&c, &h), &view, &index)
        .unwrap();
    assert_eq!(d.replica, ReplicaId(2));
}

#[test]
fn warm_remembers_the_prefill_it_sent_until_the_next_load_report() {
    // The load reports never change (stale): only the policy's own record tells that the
    // replica it just sent a 2 k-token cold prompt to is busy for about half a second.
    let view = idle(2);
    let c = ck("m@1");
    let index = PrefixIndex::default();
    let a = chain(20, 128);
    for tag in 21..25 {
        let b = chain(tag, 128);
        let at = |ms| RouteRequest {
            now: Millis(ms),
            ..req(&c, &b)
        };
        let home = warm().select(&at(0), &view, &index).unwrap().replica;
        // 10 ms after the first prompt: the other replica, whatever the home.
        let mut p = warm();
        let first = p.select(&req(&c, &a), &view, &index).unwrap().replica;
        let d = p.select(&at(10), &view, &index).unwrap();
        assert_ne!(d.replica, first, "prompt {tag} stacked on the busy replica");
        let q = d
            .explanation
            .candidate(first)
            .unwrap()
            .terms
            .get("queue_ms");
        assert!(q.unwrap() > 400.0, "{q:?}");
        // 10 s after: both replicas are idle again and the prompt goes to its home.
        let mut p = warm();
        p.select(&req(&c, &a), &view, &index).unwrap();
        assert_eq!(p.select(&at(10_000), &view, &index).unwrap().replica, home);
    }
}

#[test]
fn warm_forgets_the_prefill_of_a_request_that_was_never_sent() {
    // A 2 k-token cold prompt is decided, then shed before it is sent (the gateway's
    // admission): the replica it was charged to must not look busy to the next prompt.
    let view = idle(2);
    let c = ck("m@1");
    let index = PrefixIndex::default();
    let a = chain(20, 128);
    for tag in 21..25 {
        let b = chain(tag, 128);
        let at = |ms| RouteRequest {
            now: Millis(ms),
            ..req(&c, &b)
        };
        let home = warm().select(&at(0), &view, &index).unwrap().replica;
        let mut p = warm();
        let shed = p.select(&req(&c, &a), &view, &index).unwrap();
        assert!(shed.charged_ms > 400.0, "{}", shed.charged_ms);
        p.withdraw(&shed, Millis(5));
        let d = p.select(&at(10), &view, &index).unwrap();
        assert_eq!(
            d.replica, home,
            "prompt {tag} avoided a replica with nothing queued"
        );
        let q = d
            .explanation
            .candidate(shed.replica)
            .unwrap()
            .terms
            .get("queue_ms")
            .unwrap_or(0.0);
        assert!(q < 1.0, "a withdrawn request still counted: {q} ms queued");
    }
}

#[test]
fn warm_ages_a_stale_load_report() {
    let mut view = idle(2);
    let c = ck("m@1");
    let index = PrefixIndex::default();
    let h = chain(30, 1);
    let at = |ms| RouteRequest {
        now: Millis(ms),
        ..req(&c, &h)
    };
    let mut p = warm();
    // t = 0: replica 0 reports 1 s of prefill queued, replica 1 0.5 s.
    view.replicas[0].queued_prefill_tokens = 4000;
    view.replicas[1].queued_prefill_tokens = 2000;
    assert_eq!(
        p.select(&at(0), &view, &index).unwrap().replica,
        ReplicaId(1)
    );
    // t = 900: replica 1 sends a new report (0.3 s queued); replica 0's is 900 ms old, so
    // about 0.1 s of it is left.
    view.replicas[1].queued_prefill_tokens = 1200;
    let d = p.select(&at(900), &view, &index).unwrap();
    assert_eq!(d.replica, ReplicaId(0));
    let q0 = d
        .explanation
        .candidate(ReplicaId(0))
        .unwrap()
        .terms
        .get("queue_ms");
    assert!((q0.unwrap() - 100.0).abs() < 1e-9, "{q0:?}");
    // A fresh policy (no history) takes the report at face value.
    assert_eq!(
        warm().select(&at(900), &view, &index).unwrap().replica,
        ReplicaId(1)
    );
}

#[test]
fn warm_places_a_cold_prompt_where_storing_it_evicts_nothing() {
    let mut view = idle(2);
    for r in &mut view.replicas {
        r.kv_capacity_blocks = 1000;
    }
    let c = ck("m@1");
    let h = chain(40, 8);
    let home = warm()
        .select(&req(&c, &h), &view, &PrefixIndex::default())
        .unwrap()
        .replica;
    let other = ReplicaId(1 - home.0);
    // The home's cache is full of (evictable) old prefixes: no KV pressure, same cost, but
    // the other replica can store the prompt without evicting anything.
    let mut index = PrefixIndex::default();
    snapshot(&mut index, home.0, &chain(41, 940));
    view.replicas[home.0 as usize].kv_used_blocks = 950;
    view.replicas[other.0 as usize].kv_used_blocks = 100;
    let d = warm().select(&req(&c, &h), &view, &index).unwrap();
    assert_eq!(
        d.explanation
            .candidate(home)
            .unwrap()
            .terms
            .get("kv_pressure_ms"),
        Some(0.0)
    );
    assert_eq!((d.replica, d.explanation.branch), (other, Branch::ColdHome));
}

#[test]
fn warm_uses_approximate_matches_for_bursts() {
    let view = idle(4);
    let mut index = PrefixIndex::default();
    let c = ck("m@1");
    let h = chain(8, 32);
    let mut p = warm();
    let first = p.select(&req(&c, &h), &view, &index).unwrap();
    index.record_routed(first.replica, &h, Millis(0));
    let second = p.select(&req(&c, &h), &view, &index).unwrap();
    assert_eq!(second.replica, first.replica);
    assert_eq!(second.explanation.branch, Branch::CacheHit);
    assert!(!second.explanation.candidate(first.replica).unwrap().precise);
}

#[test]
fn warm_trades_cache_for_queue_and_spreads_hot_prefixes() {
    let mut view = idle(4);
    let mut index = PrefixIndex::default();
    let c = ck("m@1");
    let h = chain(5, 256); // 4096 tokens: ~1 s prefill at 4000 tok/s
    snapshot(&mut index, 0, &h);
    // Holder queued 0.6 s: above the 500 ms gap but not 2 x the prefix's 1 s prefill.
    view.replicas[0].queued_prefill_tokens = 2400;
    let d = warm().select(&req(&c, &h), &view, &index).unwrap();
    assert_eq!(
        (d.replica, d.explanation.branch),
        (ReplicaId(0), Branch::CacheHit)
    );
    // Holder queued 2.15 s: within the tie window of recomputing elsewhere (1 s prefill +
    // 1 s recompute charge), but over twice the prefix's prefill time: the hot prefix is
    // spread to its next home.
    view.replicas[0].queued_prefill_tokens = 8600;
    let d = warm().select(&req(&c, &h), &view, &index).unwrap();
    assert_eq!(d.explanation.branch, Branch::SpreadHotPrefix);
    assert_ne!(d.replica, ReplicaId(0));
    let spread_to = d.replica;
    // Another gateway with the same view spreads to the same replica.
    assert_eq!(
        warm().select(&req(&c, &h), &view, &index).unwrap().replica,
        spread_to
    );
    // Once that replica holds the prefix too, requests balance between the holders.
    snapshot(&mut index, spread_to.0, &h);
    let d = warm().select(&req(&c, &h), &view, &index).unwrap();
    assert_eq!(
        (d.replica, d.explanation.branch),
        (spread_to, Branch::CacheHit)
    );
    // Hugely queued holders lose to recomputing elsewhere outright.
    view.replicas[0].queued_prefill_tokens = 400_000;
    view.replicas[spread_to.0 as usize].queued_prefill_tokens = 400_000;
    let d = warm().select(&req(&c, &h), &view, &index).unwrap();
    assert_eq!(d.explanation.branch, Branch::LowestCost);
    assert_eq!(d.predicted_cached_blocks, 0);
}

#[test]
fn warm_never_spreads_into_a_full_cache() {
    let mut view = idle(2);
    for r in &mut view.replicas {
        r.kv_capacity_blocks = 1000;
    }
    let mut index = PrefixIndex::default();
    let c = ck("m@1");
    let h = chain(6, 256);
    snapshot(&mut index, 0, &h);
    view.replicas[0].kv_used_blocks = 300;
    view.replicas[0].queued_prefill_tokens = 8600; // 2.15 s wait, 1 s prefix
                                                   // Replica 1's cache is full of other (evictable) prefixes: copying this one there would
                                                   // evict them, so the holder keeps the request.
    view.replicas[1].kv_used_blocks = 950;
    let d = warm().select(&req(&c, &h), &view, &index).unwrap();
    assert_eq!(
        (d.replica, d.explanation.branch),
        (ReplicaId(0), Branch::CacheHit)
    );
    // Recomputing 4096 tokens there is charged twice: the copy evicts as much.
    let c1 = d.explanation.candidate(ReplicaId(1)).unwrap();
    assert!((c1.terms.get("recompute_ms").unwrap() - 2.0 * 1024.0).abs() < 1e-9);
    // With room for the prefix, it spreads (and the charge is single).
    view.replicas[1].kv_used_blocks = 500;
    let d = warm().select(&req(&c, &h), &view, &index).unwrap();
    let c1 = d.explanation.candidate(ReplicaId(1)).unwrap();
    assert!((c1.terms.get("recompute_ms").unwrap() - 1024.0).abs() < 1e-9);
    assert_eq!(
        (d.replica, d.explanation.branch),
        (ReplicaId(1), Branch::SpreadHotPrefix)
    );
}

#[test]
fn warm_kv_pressure_counts_only_blocks_that_cannot_be_evicted() {
    let mut view = idle(2);
    for r in &mut view.replicas {
        r.kv_capacity_blocks = 1000;
    }
    view.replicas[0].kv_used_blocks = 990;
    let mut index = PrefixIndex::default();
    let c = ck("m@1");
    let h = chain(7, 8);
    snapshot(&mut index, 0, &h[..4]);
    // 986 pinned blocks (in use by requests): the barrier steers away from replica 0.
    let d = warm().select(&req(&c, &h), &view, &index).unwrap();
    let c0 = d.explanation.candidate(ReplicaId(0)).unwrap();
    assert!(c0.terms.get("kv_pressure_ms").unwrap() > 100.0, "{c0:?}");
    assert_eq!(d.replica, ReplicaId(1));
    // Same usage, but 980 of the blocks are cached prefixes (evictable): no pressure.
    let mut cached = h[..4].to_vec();
    cached.extend(chain(70, 976));
    snapshot(&mut index, 0, &cached);
    let d = warm().select(&req(&c, &h), &view, &index).unwrap();
    let c0 = d.explanation.candidate(ReplicaId(0)).unwrap();
    assert_eq!(c0.terms.get("kv_pressure_ms"), Some(0.0), "{c0:?}");
    assert_eq!(
        (d.replica, d.explanation.branch),
        (ReplicaId(0), Branch::CacheHit)
    );
}

#[test]
fn warm_counts_unreported_in_flight_requests() {
    let mut view = idle(2);
    view.replicas[0].in_flight = 4; // sent, not yet in any load report
    let c = ck("m@1");
    let h: Vec<BlockHash> = Vec::new();
    let mut p = warm();
    let d = p
        .select(
            &RouteRequest {
                prompt_tokens: 10,
                ..req(&c, &h)
            },
            &view,
            &PrefixIndex::default(),
        )
        .unwrap();
    assert_eq!(
        (d.replica, d.explanation.branch),
        (ReplicaId(1), Branch::LeastLoaded)
    );
    let q = d
        .explanation
        .candidate(ReplicaId(0))
        .unwrap()
        .terms
        .get("queue_ms")
        .unwrap();
    assert!((q - 4.0 * 512.0 / 4.0).abs() < 1e-9, "{q}");
    assert!(
        p.avg_request_tokens() < 512.0,
        "the average learns from routed requests"
    );
}

#[test]
fn warm_never_routes_to_another_checkpoint_even_if_it_holds_the_prefix() {
    let mut view = idle(3);
    view.replicas[1].checkpoint = ck("m@2");
    view.replicas[2].health = Health::Draining;
    let mut index = PrefixIndex::default();
    let c = ck("m@1");
    let h = chain(1, 16);
    snapshot(&mut index, 1, &h);
    snapshot(&mut index, 2, &h);
    let d = warm().select(&req(&c, &h), &view, &index).unwrap();
    assert_eq!(d.replica, ReplicaId(0));
    assert!(d.fallbacks.is_empty());
    let none = ck("m@3");
    assert!(matches!(
        warm().select(&req(&none, &h), &view, &index),
        Err(RouteError::NoEligibleReplica { known: 3, .. })
    ));
}

#[test]
fn warm_costs_an_unmeasured_replica_at_its_peers_measured_rate() {
    // A CPU cluster: the holder has measured 50 tok/s; a fresh replica has measured nothing
    // yet. At the configured default (4000 tok/s) the fresh replica would look ~80x faster
    // than it is and win over a holder that recomputes only 71 tokens.
    let mut view = idle(2);
    view.replicas[0].prefill_tokens_per_s = 50.0;
    let mut index = PrefixIndex::default();
    let c = ck("m@1");
    let h = chain(5, 64); // 1024 + 7 tokens
    snapshot(&mut index, 0, &h[..60]);
    let d = warm().select(&req(&c, &h), &view, &index).unwrap();
    assert_eq!(
        (d.replica, d.explanation.branch),
        (ReplicaId(0), Branch::CacheHit)
    );
    let fresh = d.explanation.candidate(ReplicaId(1)).unwrap();
    // 1031 uncached tokens at the peers' 50 tok/s.
    assert!((fresh.terms.get("prefill_ms").unwrap() - 1031.0 / 0.05).abs() < 1e-6);
    // With nobody measured, the configured default applies.
    view.replicas[0].prefill_tokens_per_s = 0.0;
    let d = warm().select(&req(&c, &h), &view, &index).unwrap();
    let fresh = d.explanation.candidate(ReplicaId(1)).unwrap();
    assert!((fresh.terms.get("prefill_ms").unwrap() - 1031.0 / 4.0).abs() < 1e-9);
}

#[test]
fn warm_treats_noise_level_rate_differences_as_a_cold_tie() {
    // Two idle replicas whose measured rates differ by 1% (noise between identical
    // servers): new prefixes still spread by their rendezvous homes instead of all going
    // to the one that measured faster. A replica 2x slower is not a tie.
    let c = ck("m@1");
    let mut view = idle(2);
    view.replicas[0].prefill_tokens_per_s = 400.0;
    // The replicas 16 cold prefixes (1,024 tokens each) go to under `cfg` and `rate1`.
    let mut homes = |cfg: &WarmConfig, rate1: f64| {
        view.replicas[1].prefill_tokens_per_s = rate1;
        (0..16)
            .map(|tag| {
                let d = Warm::new(cfg.clone())
                    .select(
                        &req(&c, &chain(300 + tag, 64)),
                        &view,
                        &PrefixIndex::default(),
                    )
                    .unwrap();
                assert_eq!(d.explanation.branch, Branch::ColdHome);
                d.replica
            })
            .collect::<std::collections::HashSet<_>>()
    };
    let default = WarmConfig::default();
    assert_eq!(
        homes(&default, 396.0).len(),
        2,
        "16 prefixes should use both replicas"
    );
    assert_eq!(
        homes(&default, 200.0),
        [ReplicaId(0)].into(),
        "2x faster wins"
    );
    // Without the ratio, the 1% gap (far over 10 ms at these sizes) decides every time.
    let strict = WarmConfig {
        rate_noise_ratio: 0.0,
        ..default
    };
    assert_eq!(homes(&strict, 396.0), [ReplicaId(0)].into());
}

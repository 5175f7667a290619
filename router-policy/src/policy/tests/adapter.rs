//! `warm`'s LoRA adapter term: a replica that would load the request's adapter first pays
//! `adapter_load_ms` in its predicted TTFT.

use super::*;
use crate::cluster::AdapterState;

fn warm() -> Warm {
    Warm::new(WarmConfig::default())
}

/// `view` with the adapter loaded on `loaded` only.
fn with_adapter(mut view: ClusterView, loaded: u32) -> ClusterView {
    for r in &mut view.replicas {
        r.adapter = if r.id == ReplicaId(loaded) {
            AdapterState::Loaded
        } else {
            AdapterState::NotLoaded
        };
    }
    view
}

#[test]
fn a_cold_adapter_prompt_goes_where_the_adapter_is_loaded_not_to_its_home() {
    let c = ck("m@1");
    for tag in 0..20 {
        let h = chain(500 + tag, 8);
        let home = warm()
            .select(&req(&c, &h), &idle(4), &PrefixIndex::default())
            .unwrap()
            .replica;
        let loaded = (home.0 + 1) % 4;
        let view = with_adapter(idle(4), loaded);
        let d = warm()
            .select(&req(&c, &h), &view, &PrefixIndex::default())
            .unwrap();
        assert_eq!(d.replica, ReplicaId(loaded), "prefix {tag}");
        assert_eq!(d.explanation.branch, Branch::ColdHome);
        let term = |id: u32| {
            d.explanation
                .candidate(ReplicaId(id))
                .unwrap()
                .terms
                .get("adapter_load_ms")
        };
        assert_eq!(term(loaded), Some(0.0));
        assert_eq!(term(home.0), Some(50.0));
        assert_costs_are_their_terms(&d);
    }
}

#[test]
fn loading_the_adapter_beats_a_long_queue_where_it_is_loaded() {
    let c = ck("m@1");
    let h = chain(77, 8);
    let mut view = with_adapter(idle(3), 0);
    // 4000 tokens queued at 4000 tok/s: a second's wait against a 50 ms load elsewhere.
    view.replicas[0].running = 1;
    view.replicas[0].queued_prefill_tokens = 4000;
    let d = warm()
        .select(&req(&c, &h), &view, &PrefixIndex::default())
        .unwrap();
    assert_ne!(d.replica, ReplicaId(0));
    // A queue shorter than the load time keeps it where the adapter is.
    view.replicas[0].queued_prefill_tokens = 100; // 25 ms
    let d = warm()
        .select(&req(&c, &h), &view, &PrefixIndex::default())
        .unwrap();
    assert_eq!(d.replica, ReplicaId(0));
}

#[test]
fn the_term_is_configurable_and_absent_for_base_model_requests() {
    let c = ck("m@1");
    let h = chain(91, 8);
    let home = warm()
        .select(&req(&c, &h), &idle(4), &PrefixIndex::default())
        .unwrap();
    assert!(home
        .explanation
        .candidates
        .iter()
        .all(|cand| cand.terms.get("adapter_load_ms").is_none()));
    // With a zero load time the adapter does not move the prompt from its home.
    let free = WarmConfig {
        adapter_load_ms: 0.0,
        ..WarmConfig::default()
    };
    let loaded = (home.replica.0 + 1) % 4;
    let d = Warm::new(free)
        .select(
            &req(&c, &h),
            &with_adapter(idle(4), loaded),
            &PrefixIndex::default(),
        )
        .unwrap();
    assert_eq!(d.replica, home.replica);
    let bad = WarmConfig {
        adapter_load_ms: -1.0,
        ..WarmConfig::default()
    };
    assert!(bad.validate().is_err());
}

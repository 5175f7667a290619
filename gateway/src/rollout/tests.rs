//! The rollout rule at the gateway: shares, pause and resume, abort, config reloads.

use super::*;
use crate::config::PrewarmConfig;
use router_policy::RolloutState;
use warmpath_core::rng::mix64;

/// Model `m`, from `m@1` to `m@2` at `percent`, pre-warming `top_n` prefixes.
pub(crate) fn cfg(percent: f64, top_n: usize) -> RolloutConfig {
    RolloutConfig {
        model: "m".into(),
        from: "m@1".into(),
        to: "m@2".into(),
        percent,
        state: RolloutState::Active,
        prewarm: PrewarmConfig {
            top_n,
            ..PrewarmConfig::default()
        },
    }
}

fn on_new(m: &ModelRollout) -> usize {
    (0..4000u64)
        .filter(|k| m.choose(mix64(*k)).0.as_str() == "m@2")
        .count()
}

#[test]
fn the_share_waits_for_the_prewarm_and_ramps_with_it() {
    let r = Rollouts::default();
    let m = r.set(&cfg(50.0, 4));
    assert_eq!(
        on_new(&m),
        0,
        "nothing moves before the new checkpoint is warm"
    );
    let generation = m.generation();
    m.update(generation, |p| {
        p.started = true;
        p.planned = 8;
        p.done = 4;
    });
    let half = on_new(&m) as f64 / 4000.0;
    assert!((half - 0.25).abs() < 0.03, "{half}");
    m.update(generation, |p| {
        p.done = 8;
        p.finished = true;
    });
    assert!((on_new(&m) as f64 / 4000.0 - 0.5).abs() < 0.03);
    // A stale task's update is ignored.
    m.abort();
    m.update(generation, |p| p.done = 0);
    assert_eq!(m.status().progress.done, 8);
    assert_eq!(on_new(&m), 0, "abort: everyone back on m@1");
}

#[test]
fn pause_then_resume_never_moves_a_conversation_back() {
    let r = Rollouts::default();
    let m = r.set(&cfg(80.0, 4));
    let generation = m.generation();
    let step = |done: u64| {
        m.update(generation, |p| {
            p.started = true;
            p.planned = 4;
            p.done = done;
        })
    };
    step(1);
    let before: Vec<bool> = (0..2000u64)
        .map(|k| m.choose(mix64(k)).0.as_str() == "m@2")
        .collect();
    m.pause();
    step(3); // the pre-warm goes on while paused; the share holds
    assert!((m.share() - 0.2).abs() < 1e-9);
    assert!(!m.resume(), "a pause needs no new pre-warm");
    assert_eq!(m.generation(), generation, "the running pre-warm continues");
    assert!((m.share() - 0.6).abs() < 1e-9);
    for (k, was_new) in before.iter().enumerate() {
        let now_new = m.choose(mix64(k as u64)).0.as_str() == "m@2";
        assert!(!was_new || now_new, "conversation {k} moved back");
    }
    // Paused from the start (config `state: paused`): pre-warm still runs.
    let mut c = cfg(50.0, 4);
    c.state = RolloutState::Paused;
    let p = r.set(&c);
    assert!(p.wants_prewarm());
    assert_eq!(p.share(), 0.0);
    // After an abort, resuming restarts the pre-warm.
    m.abort();
    assert!(!m.wants_prewarm());
    assert!(m.resume());
    assert!(m.wants_prewarm());
}

#[test]
fn a_rollout_at_zero_percent_has_nothing_to_prewarm() {
    // No conversation can move at 0%: a pre-warm would only replay whatever history
    // the gateway happens to have when the new replica shows up (issue 44, item 9).
    let r = Rollouts::default();
    assert!(!r.set(&cfg(0.0, 4)).wants_prewarm());
    assert!(r.set(&cfg(10.0, 4)).wants_prewarm());
}

#[test]
fn naive_cut_over_and_config_reloads() {
    let r = Rollouts::default();
    let started = r.apply_config(&[cfg(100.0, 0)], &[]);
    assert_eq!(started.len(), 1);
    assert_eq!(
        on_new(&r.get("m").unwrap()),
        4000,
        "no pre-warm: full share at once"
    );
    // Unchanged on reload: kept (with its state).
    r.get("m").unwrap().pause();
    assert!(r
        .apply_config(&[cfg(100.0, 0)], &[cfg(100.0, 0)])
        .is_empty());
    assert_eq!(r.list()[0].state, RolloutState::Paused);
    // Gone from the file: ended.
    r.apply_config(&[], &[cfg(100.0, 0)]);
    assert!(r.get("m").is_none());
}

#[test]
fn the_ramp_counts_from_the_shared_wall_clock_start() {
    // A gateway that (re)started mid-ramp takes the record's start, not its own (issue 44,
    // item 8): 10 s into a 20 s ramp, half the target.
    let r = Rollouts::default();
    let mut c = cfg(40.0, 0);
    c.prewarm.ramp_s = 20;
    let m = r.set(&c);
    assert!(m.share() < 0.01, "a fresh ramp starts at 0: {}", m.share());
    m.apply_remote(RolloutState::Active, 0.0, model::now_ms() - 10_000);
    assert!((m.share() - 0.2).abs() < 0.01, "{}", m.share());
    assert!((on_new(&m) as f64 / 4000.0 - 0.2).abs() < 0.03);
}

#[test]
fn a_replaced_or_ended_rollouts_prewarm_changes_nothing() {
    // Without a fleet: the task of a rollout replaced or ended during its pre-warm writes
    // into its own, retired copy only; what is in force never sees it.
    let r = Rollouts::default();
    let old = r.set(&cfg(50.0, 4));
    let task = old.claim_prewarm().expect("a pre-warm to run");
    assert_eq!(old.claim_prewarm(), None, "one task per generation");
    let new = r.set(&cfg(30.0, 4));
    assert!(
        !old.update(task, |p| p.done = 7),
        "the replaced one's task stopped"
    );
    assert_eq!(new.status().progress, Progress::default());
    assert_eq!(r.get("m").unwrap().status().target_percent, 30.0);
    let task = new.claim_prewarm().expect("the new one pre-warms");
    assert!(r.remove("m"));
    assert!(!new.update(task, |p| p.finished = true));
    assert!(r.get("m").is_none(), "ended stays ended");
}

#[test]
fn a_shared_change_is_previewed_before_it_applies_and_only_the_owner_prewarms() {
    let r = Rollouts::default();
    let m = r.set(&cfg(50.0, 4));
    // The record a pause or abort writes first; nothing changes here until it is applied.
    assert_eq!(m.preview(model::Change::Abort).0, RolloutState::Aborted);
    assert_eq!(m.preview(model::Change::Pause).0, RolloutState::Paused);
    assert_eq!(m.status().state, RolloutState::Active);
    let task = m.generation();
    assert!(!m.apply(model::Change::Abort));
    assert_ne!(m.generation(), task, "an abort stops the pre-warm");
    // Resumed on a gateway that does not own it: the owner pre-warms, not this one.
    m.set_shared(model::Shared {
        rev: 3,
        gen: 2,
        owner: "other".into(),
        mine: false,
    });
    assert!(m.apply(model::Change::Resume));
    assert_eq!(m.claim_prewarm(), None);
}

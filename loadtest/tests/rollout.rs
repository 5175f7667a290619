//! Checkpoint rollout simulation end to end: on a small workload with hot shared prefixes,
//! the naive cut-over's cold spike is visible in the first window after the start and the
//! pre-warm arm removes most of it; with pre-warm every conversation moves to the new
//! checkpoint once and never comes back.

#![allow(clippy::unwrap_used)] // test helpers: a panic is the failure report

use loadtest::rollout_key;
use std::collections::HashMap;

mod common;

/// 8 system prompts of 512 tokens x 40 questions at 4 requests/s on 2 CPU replicas; 2 new
/// replicas join at 30 s.
const FLAGS: &[&str] = &[
    "--workload",
    "shared-prefix",
    "--groups",
    "8",
    "--prompts-per-group",
    "40",
    "--system-prompt-len",
    "512",
    "--question-len",
    "32",
    "--output-len",
    "4",
    "--request-rate",
    "4",
    "--replicas",
    "2",
    "--seed",
    "3",
    "--policy",
    "warm",
    "--rollout-at",
    "30",
    "--window",
    "10",
    // Keyed like completions: one key per system prompt (chats key per conversation).
    "--rollout-key",
    "first-blocks",
];

#[test]
fn prewarm_removes_the_cold_spike_and_conversations_move_once() {
    let dir = tempfile::tempdir().unwrap();
    let (json, plots) = (dir.path().join("r.json"), dir.path().join("plots"));
    let mut v: Vec<&str> = FLAGS.to_vec();
    v.extend([
        "--json",
        json.to_str().unwrap(),
        "--plot",
        plots.to_str().unwrap(),
    ]);
    let args = common::args(&v);
    let r = loadtest::simulate_cmd::run(&args).unwrap();
    let (naive, pre) = (&r[0], &r[1]);
    assert_eq!(
        (naive.summary.policy.as_str(), pre.summary.policy.as_str()),
        ("warm/naive", "warm/prewarm")
    );
    assert_eq!((naive.summary.completed, pre.summary.completed), (320, 320));
    let first =
        |s: &loadtest::metrics::Summary| s.windows.iter().find(|w| w.t_s == 0.0).unwrap().clone();
    let (n0, p0) = (first(&naive.summary), first(&pre.summary));
    // Naive: every conversation lands on cold replicas at once.
    assert_eq!(n0.new_checkpoint_share, 1.0);
    assert!(n0.cache_hit_rate < 0.6, "naive hit {}", n0.cache_hit_rate);
    assert!(p0.cache_hit_rate > 0.9, "prewarm hit {}", p0.cache_hit_rate);
    assert!(
        p0.p99_ttft_ms * 4.0 < n0.p99_ttft_ms,
        "prewarm p99 {} vs naive {}",
        p0.p99_ttft_ms,
        n0.p99_ttft_ms
    );
    // The windows before the start are the same run in both arms.
    let before = |s: &loadtest::metrics::Summary| {
        s.windows
            .iter()
            .find(|w| w.t_s == -10.0)
            .unwrap()
            .p99_ttft_ms
    };
    assert_eq!(before(&naive.summary), before(&pre.summary));
    let ro = pre.summary.rollout.as_ref().unwrap();
    assert!(ro.prewarm_done_after_s.unwrap() > 0.0 && ro.new_checkpoint_share > 0.5);

    // Stickiness: by conversation key, once on the new checkpoint, never back.
    let workload = loadtest::workload::build(&args.workload, args.seed).unwrap();
    let mut by_key: HashMap<u64, Vec<(f64, bool)>> = HashMap::new();
    for rec in &pre.records {
        let key = rollout_key(&workload.requests[rec.id as usize].prompt, 16);
        let new = rec.checkpoint.as_ref().unwrap().as_str().ends_with("next");
        by_key.entry(key).or_default().push((rec.start_ms, new));
    }
    assert_eq!(by_key.len(), 8, "one key per system prompt");
    let mut moved = 0;
    for seq in by_key.values_mut() {
        seq.sort_by(|a, b| a.0.total_cmp(&b.0));
        let first_new = seq.iter().position(|x| x.1).unwrap();
        assert!(
            seq[first_new..].iter().all(|x| x.1),
            "a conversation went back"
        );
        assert!(seq[first_new].0 >= 30_000.0, "moved before the start");
        moved += 1;
    }
    assert_eq!(
        moved, 8,
        "target 100%: every conversation ends on the new checkpoint"
    );

    // The JSON carries the arm and the windows; the plot shows p99 per window.
    let arr: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    assert_eq!(arr[1]["rollout"]["arm"], "prewarm");
    assert!(arr[0]["windows"].as_array().unwrap().len() >= 8);
    let svg = std::fs::read_to_string(plots.join("rollout_ttft_p99.svg")).unwrap();
    assert!(svg.contains("warm/prewarm") && svg.contains("<polyline"));
}

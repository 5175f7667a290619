//! Role-split (P/D) simulation end to end: on the mixed workload (short chats among long
//! documents) a 1-prefill + 3-decode cluster splits the long prompts only, the decode
//! replicas import their KV and never prefill a long prompt, so the short chats' decode is
//! no longer stalled by long prefill chunks; the co-located arm of the same run splits
//! nothing.

#![allow(clippy::unwrap_used)] // test helpers: a panic is the failure report

mod common;

const FLAGS: &[&str] = &[
    "--workload",
    "mixed",
    "--num-requests",
    "96",
    "--long-every",
    "4",
    "--request-rate",
    "2",
    "--replicas",
    "4",
    "--policy",
    "cache_aware",
    "--prefill-replicas",
    "0,1",
];

#[test]
fn a_role_split_cluster_splits_long_prompts_and_frees_decode_from_prefill() {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("pd.json");
    let mut v: Vec<&str> = FLAGS.to_vec();
    v.extend(["--json", json.to_str().unwrap()]);
    let r = loadtest::simulate_cmd::run(&common::args(&v)).unwrap();
    assert_eq!(r.len(), 2);
    let (co, pd) = (&r[0].summary, &r[1].summary);
    assert_eq!(
        (co.policy.as_str(), pd.policy.as_str()),
        ("cache_aware/colocated", "cache_aware/1P+3D")
    );
    assert_eq!((co.completed, pd.completed), (96, 96));
    let (cd, pdd) = (co.disagg.as_ref().unwrap(), pd.disagg.as_ref().unwrap());
    assert_eq!((cd.prefill_replicas, cd.split_fraction), (0, 0.0));
    // 24 long documents of 2,064 tokens are split; the 72 short chats are not.
    assert_eq!((pdd.prefill_replicas, pdd.decode_replicas), (1, 3));
    assert!(
        (pdd.split_fraction - 0.25).abs() < 1e-9,
        "split {}",
        pdd.split_fraction
    );
    assert!(
        pdd.mean_transferred_tokens >= 2000.0,
        "transferred {}",
        pdd.mean_transferred_tokens
    );
    assert!(pdd.p99_exposed_transfer_ms > 0.0);
    // Nothing is served (decoded) by the prefill replica.
    let served: std::collections::BTreeSet<&str> = r[1]
        .records
        .iter()
        .filter_map(|rec| rec.replica.as_deref())
        .collect();
    assert_eq!(
        served.into_iter().collect::<Vec<_>>(),
        ["r1", "r2", "r3"],
        "only decode replicas serve answers"
    );
    // The decode replicas no longer run 512-token prefill chunks between decode steps.
    let short = |s: &loadtest::metrics::Summary| s.classes["short"].p99_tpot_ms;
    assert!(
        short(pd) * 2.0 < short(co),
        "short TPOT p99: split {} vs co-located {}",
        short(pd),
        short(co)
    );
    let arr: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    assert_eq!(arr[1]["disagg"]["prefill_replicas"], 1);
    assert!(
        arr[1]["disagg"]["p99_exposed_transfer_ms"]
            .as_f64()
            .unwrap()
            > 0.0
    );
}

#[test]
fn a_role_split_does_not_combine_with_a_rollout() {
    let mut v: Vec<&str> = FLAGS.to_vec();
    v.extend(["--rollout-at", "10"]);
    let e = loadtest::simulate_cmd::run(&common::args(&v)).unwrap_err();
    assert!(
        e.to_string()
            .contains("--prefill-replicas cannot be combined"),
        "{e}"
    );
}

/// Requests behind one long system prompt arriving while its first prefill still runs: the
/// decode replica the first went to does not hold the prompt until its import, so the rest
/// are split too (to the prefill replica that holds it), not prefilled whole on a decode
/// replica that the routing history wrongly credits with it.
#[test]
fn a_burst_behind_one_long_prompt_is_not_prefilled_on_decode_replicas() {
    let flags = [
        "--workload",
        "shared-prefix",
        "--groups",
        "2",
        "--prompts-per-group",
        "12",
        "--system-prompt-len",
        "2048",
        "--question-len",
        "32",
        "--output-len",
        "8",
        "--request-rate",
        "20",
        "--replicas",
        "3",
        "--policy",
        "warm",
        "--prefill-replicas",
        "1",
    ];
    let r = loadtest::simulate_cmd::run(&common::args(&flags)).unwrap();
    let d = r[0].summary.disagg.as_ref().unwrap();
    assert_eq!(r[0].summary.completed, 24);
    assert!(d.split_fraction > 0.0);
    // Each request's own question (32 tokens) and partial block: no 2,048-token prefill.
    assert!(
        d.mean_decode_computed_tokens < 100.0,
        "decode replicas computed {} prompt tokens per request",
        d.mean_decode_computed_tokens
    );
}

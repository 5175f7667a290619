//! `loadtest simulate` end to end through the library: determinism for a seed, the JSON
//! report shape (per class for the mixed workload), plots, and a malformed trace line named
//! in the error.

#![allow(clippy::unwrap_used)] // test helpers: a panic is the failure report

use loadtest::report::RunReport;
use std::io::Write;

mod common;
use common::args;

/// A small shared-prefix workload with Poisson arrivals, so that the seed drives content,
/// shuffling, arrival times and the `random` policy.
fn small(seed: &str, policies: &[&str]) -> Vec<String> {
    let mut v: Vec<String> = [
        "--workload",
        "shared-prefix",
        "--groups",
        "12",
        "--prompts-per-group",
        "6",
        "--system-prompt-len",
        "256",
        "--question-len",
        "32",
        "--output-len",
        "8",
        "--request-rate",
        "20",
        "--replicas",
        "4",
        "--seed",
        seed,
    ]
    .map(String::from)
    .to_vec();
    for p in policies {
        v.extend(["--policy".to_string(), p.to_string()]);
    }
    v
}

fn fingerprint(reports: &[RunReport]) -> String {
    reports
        .iter()
        .map(|r| {
            format!(
                "{}\n{}",
                serde_json::to_string(&r.summary).unwrap(),
                serde_json::to_string(&r.records).unwrap()
            )
        })
        .collect()
}

#[test]
fn same_seed_same_result_for_every_policy() {
    let all = [
        "round_robin",
        "random",
        "least_loaded",
        "consistent_hash",
        "cache_aware",
        "kv_cost",
        "warm",
    ];
    let a = loadtest::simulate_cmd::run(&args(&small("7", &all))).unwrap();
    let b = loadtest::simulate_cmd::run(&args(&small("7", &all))).unwrap();
    assert_eq!(a.len(), all.len());
    for (r, name) in a.iter().zip(all) {
        assert_eq!(r.summary.policy, name);
        assert_eq!(r.summary.completed, 72, "{name}: {:?}", r.summary.errors);
        // Every request's timeline is in the report, in request order.
        assert!(r.records.iter().enumerate().all(|(i, x)| x.id == i as u64));
        assert!(r.summary.oracle_hit_rate.is_some());
    }
    assert_eq!(
        fingerprint(&a),
        fingerprint(&b),
        "same seed, different runs"
    );

    let c = loadtest::simulate_cmd::run(&args(&small("8", &all))).unwrap();
    assert_ne!(fingerprint(&a), fingerprint(&c), "the seed changes nothing");
}

#[test]
fn json_array_has_vllm_keys_per_policy_and_plots_are_written() {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("out.json");
    let plots = dir.path().join("plots");
    let mut v = small("1", &["round_robin", "warm"]);
    let (j, p) = (json.to_str().unwrap(), plots.to_str().unwrap());
    v.extend(["--json", j, "--plot", p, "--goodput", "ttft:1000"].map(String::from));
    loadtest::simulate_cmd::run(&args(&v)).unwrap();
    let arr: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let arr = arr.as_array().expect("a JSON array");
    assert_eq!(arr.len(), 2);
    for (o, name) in arr.iter().zip(["round_robin", "warm"]) {
        assert_eq!(o["policy"], name);
        for k in [
            "completed",
            "request_throughput",
            "request_goodput",
            "output_throughput",
            "total_token_throughput",
            "mean_ttft_ms",
            "median_ttft_ms",
            "p99_ttft_ms",
            "mean_tpot_ms",
            "p99_tpot_ms",
            "mean_itl_ms",
            "mean_e2el_ms",
            "p99_e2el_ms",
            "cache_hit_rate",
            "oracle_hit_rate",
            "replica_share",
            "errors",
        ] {
            assert!(o.get(k).is_some(), "{name}: missing {k}");
        }
        let hit = o["cache_hit_rate"].as_f64().unwrap();
        assert!((0.0..=1.0).contains(&hit));
        assert!(o["request_goodput"].as_f64().is_some());
        let share: f64 = o["replica_share"]
            .as_object()
            .unwrap()
            .values()
            .map(|v| v.as_f64().unwrap())
            .sum();
        assert!((share - 1.0).abs() < 1e-9, "{name}: shares sum to {share}");
    }
    for f in ["ttft_cdf.svg", "throughput.svg", "hit_rate.svg"] {
        let svg = std::fs::read_to_string(plots.join(f)).unwrap();
        assert!(svg.starts_with("<svg") && svg.contains("warm"), "{f}");
    }
}

#[test]
fn malformed_trace_line_is_named() {
    let mut f = tempfile::NamedTempFile::new().unwrap();
    writeln!(
        f,
        "{{\"timestamp\": 0, \"input_length\": 600, \"output_length\": 5, \"hash_ids\": [0, 1]}}"
    )
    .unwrap();
    writeln!(
        f,
        "{{\"timestamp\": 5, \"input_length\": 100, \"output_length\": 2, \"hash_ids\": [0]}}"
    )
    .unwrap();
    writeln!(f, "{{\"timestamp\": 9, \"input_length\": 100, \"output_le").unwrap();
    let path = f.path().to_str().unwrap().to_string();
    let v = [
        "--workload",
        "mooncake",
        "--trace",
        &path,
        "--policy",
        "warm",
    ];
    let err = loadtest::simulate_cmd::run(&args(&v)).unwrap_err();
    let msg = format!("{err:#}");
    assert!(
        msg.contains(&format!("{path}:3: invalid Mooncake row")),
        "{msg}"
    );
}

/// Gateways whose indexes hold only their own routing decisions (no KV events) lose the
/// cache hits one gateway gets; sharing the routing history brings them back.
#[test]
fn a_shared_routing_history_restores_what_one_gateway_knows() {
    let hit = |extra: &[&str]| {
        let mut v = small("3", &["warm"]);
        v.extend(extra.iter().map(|s| s.to_string()));
        loadtest::simulate_cmd::run(&args(&v)).unwrap()[0]
            .summary
            .cache_hit_rate
    };
    let one = hit(&["--gateways", "1", "--kv-events", "false"]);
    let private = hit(&["--gateways", "3", "--kv-events", "false"]);
    let shared = hit(&[
        "--gateways",
        "3",
        "--kv-events",
        "false",
        "--shared-history",
        "true",
    ]);
    assert!(private < one - 0.05, "one {one}, three private {private}");
    assert!(
        shared > private + 0.05,
        "private {private}, shared {shared}"
    );
    assert!((shared - one).abs() < 0.03, "one {one}, shared {shared}");
}

#[test]
fn mixed_workload_reports_each_class_next_to_the_overall_keys() {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("mixed.json");
    let v: Vec<String> = [
        "--workload",
        "mixed",
        "--num-requests",
        "48",
        "--long-every",
        "4",
        "--replicas",
        "2",
        "--policy",
        "round_robin",
        "--json",
        json.to_str().unwrap(),
    ]
    .map(String::from)
    .to_vec();
    let reports = loadtest::simulate_cmd::run(&args(&v)).unwrap();
    let long = reports[0]
        .records
        .iter()
        .filter(|r| r.class == Some("long"));
    assert_eq!(long.count(), 12);
    let arr: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let o = &arr.as_array().expect("a JSON array")[0];
    assert_eq!(
        (o["policy"].as_str(), o["workload"].as_str()),
        (Some("round_robin"), Some("mixed"))
    );
    assert_eq!(o["request_rate"], 1.0);
    assert!(o.get("p99_tpot_ms").is_some() && o.get("cache_hit_rate").is_some());
    let (short, long) = (&o["classes"]["short"], &o["classes"]["long"]);
    assert_eq!(
        (short["completed"].as_u64(), long["completed"].as_u64()),
        (Some(36), Some(12))
    );
    // A 2,064-token prefill takes seconds on the CPU profile; a short chat's does not.
    let ttft = |c: &serde_json::Value| c["median_ttft_ms"].as_f64().unwrap();
    assert!(
        ttft(long) > 5.0 * ttft(short),
        "long {} short {}",
        ttft(long),
        ttft(short)
    );
    for k in ["median_tpot_ms", "p99_tpot_ms", "p99_ttft_ms"] {
        assert!(short[k].as_f64().unwrap() > 0.0, "short {k}");
    }
}

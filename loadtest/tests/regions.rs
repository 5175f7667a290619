//! Multi-region simulation end to end: local mode never leaves home, spill mode leaves an
//! overloaded home region, and a request served in another region pays the round trip once
//! on its TTFT (and end-to-end latency), not on its TPOT.

#![allow(clippy::unwrap_used)] // test helpers: a panic is the failure report

use loadtest::report::RunReport;

mod common;

fn run(extra: &[&str]) -> Vec<RunReport> {
    loadtest::simulate_cmd::run(&common::args(extra)).unwrap()
}

/// Every request comes from region `a`; `b` sends nothing. 48 requests of 256 + 32 prompt
/// tokens at 4/s: a's two 555 tokens/s replicas queue (local p99 ~0.66 s) while b's idle.
const OVERLOADED_A: &[&str] = &[
    "--workload",
    "shared-prefix",
    "--groups",
    "8",
    "--prompts-per-group",
    "6",
    "--system-prompt-len",
    "256",
    "--question-len",
    "32",
    "--output-len",
    "4",
    "--request-rate",
    "4",
    "--seed",
    "2",
    "--replicas",
    "4",
    "--regions",
    "a,b",
    "--rtt",
    "a-b=20",
    "--origin-share",
    "a=1,b=0",
    "--diurnal",
    "false",
];

#[test]
fn local_stays_home_and_spill_relieves_an_overloaded_region() {
    let mut v = OVERLOADED_A.to_vec();
    v.extend(["--policy", "warm@local", "--policy", "warm@spill"]);
    let r = run(&v);
    let (local, spill) = (&r[0], &r[1]);
    assert_eq!(local.summary.policy, "warm@local");
    assert_eq!(local.summary.completed, 48);
    assert_eq!(local.summary.cross_region_fraction, Some(0.0));
    assert!(local
        .records
        .iter()
        .all(|x| x.served_region.as_ref().unwrap().as_str() == "a" && x.rtt_ms == Some(0.0)));
    assert_eq!(local.summary.regions["a"].served, 48);

    let cross = spill.summary.cross_region_fraction.unwrap();
    assert!(cross > 0.0, "spill never left the overloaded region");
    assert_eq!(
        spill.summary.regions["b"].served as f64,
        (cross * 48.0).round()
    );
    // Every request served in b paid the 20 ms round trip.
    for x in spill
        .records
        .iter()
        .filter(|x| x.served_region.as_ref().unwrap().as_str() == "b")
    {
        assert_eq!(x.rtt_ms, Some(20.0));
    }
    assert!(
        spill.summary.p99_ttft_ms < local.summary.p99_ttft_ms,
        "spill p99 {} vs local {}",
        spill.summary.p99_ttft_ms,
        local.summary.p99_ttft_ms
    );
}

#[test]
fn a_cross_region_request_pays_the_round_trip_on_ttft_only() {
    // Two unique, equally long prompts far apart; round robin (regions ignored) sends the
    // first to a's replica and the second to b's.
    let r = run(&[
        "--workload",
        "shared-prefix",
        "--groups",
        "2",
        "--prompts-per-group",
        "1",
        "--system-prompt-len",
        "128",
        "--question-len",
        "16",
        "--output-len",
        "6",
        "--request-rate",
        "0.02",
        "--seed",
        "1",
        "--replicas",
        "2",
        "--ordered",
        "--regions",
        "a,b",
        "--rtt",
        "a-b=1000",
        "--origin-share",
        "a=1,b=0",
        "--diurnal",
        "false",
        "--policy",
        "round_robin@global",
    ]);
    let recs = &r[0].records;
    let (home, away) = (&recs[0], &recs[1]);
    assert_eq!(home.served_region.as_ref().unwrap().as_str(), "a");
    assert_eq!(away.served_region.as_ref().unwrap().as_str(), "b");
    assert_eq!((home.rtt_ms, away.rtt_ms), (Some(0.0), Some(1000.0)));
    let (t0, t1) = (home.ttft_ms.unwrap(), away.ttft_ms.unwrap());
    assert!((t1 - t0 - 1000.0).abs() < 1e-6, "ttft {t0} vs {t1}");
    assert!((away.e2el_ms - home.e2el_ms - 1000.0).abs() < 1e-6);
    assert!((away.tpot_ms().unwrap() - home.tpot_ms().unwrap()).abs() < 1e-9);
    assert_eq!(r[0].summary.cross_region_fraction, Some(0.5));
}

//! `loadtest simulate --replica-order fcfs,shortest`: both replica prefill orders in one
//! run, labelled, with the floor comparison, and the shortest-first order keeping short
//! chats out from behind long prefills.

#![allow(clippy::unwrap_used)] // test helpers: a panic is the failure report

mod common;
use common::args;

#[test]
fn shortest_first_cuts_the_short_chats_tail_behind_long_prompts() {
    // One CPU replica; short chats with every 8th request a 2,048-token prompt (3.7 s of
    // prefill), half a request a second.
    let reports = loadtest::simulate_cmd::run(&args(&[
        "--workload",
        "mixed",
        "--replicas",
        "1",
        "--request-rate",
        "0.5",
        "--num-prompts",
        "120",
        "--seed",
        "1",
        "--policy",
        "warm",
        "--replica-order",
        "fcfs,shortest",
    ]))
    .unwrap();
    let labels: Vec<&str> = reports.iter().map(|r| r.summary.policy.as_str()).collect();
    assert_eq!(labels, ["warm/fcfs", "warm/shortest"]);
    let short = |i: usize| reports[i].summary.classes["short"].p99_ttft_ms;
    let long = |i: usize| &reports[i].summary.classes["long"];
    for (i, r) in reports.iter().enumerate() {
        assert_eq!(r.summary.completed, 120, "{}", r.summary.policy);
        assert_eq!(long(i).completed, 15);
        let o = r.summary.prefill_order.as_ref().unwrap();
        assert!(
            o.median_floor_ms > 0.0 && o.median_request_ratio >= 1.0,
            "{o:?}"
        );
    }
    assert_eq!(
        reports[0].summary.prefill_order.as_ref().unwrap().order,
        "fcfs"
    );
    // FCFS: a chat that lands behind a long prefill waits for all of it (~3.7 s).
    assert!(short(0) > 3_000.0, "fcfs short p99 {}", short(0));
    assert!(
        short(1) < 0.6 * short(0),
        "shortest short p99 {} vs fcfs {}",
        short(1),
        short(0)
    );
    // The long prompts pay little for it: within 10% at the median.
    assert!(long(1).median_ttft_ms < 1.1 * long(0).median_ttft_ms);
}

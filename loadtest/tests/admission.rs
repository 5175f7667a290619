//! `loadtest simulate --admission fcfs,flow`: tenants, classes and a TTFT objective on an
//! overloaded cluster; the flow queue (`router_policy::flow`) keeps goodput where the
//! first-come queue collapses, sheds only interactive requests, and reports per tenant and
//! class.

#![allow(clippy::unwrap_used)] // test helpers: a panic is the failure report

mod common;
use common::args;

#[test]
fn flow_admission_keeps_goodput_under_overload() {
    // Two CPU replicas, short chats and 2,048-token prompts at 3 requests/s (well past
    // what two replicas prefill), 8 in flight per replica, a 1 s objective, two tenants,
    // a fifth of the requests batch.
    let reports = loadtest::simulate_cmd::run(&args(&[
        "--workload",
        "mixed",
        "--replicas",
        "2",
        "--request-rate",
        "3",
        "--num-prompts",
        "300",
        "--seed",
        "1",
        "--policy",
        "warm",
        "--admission",
        "fcfs,flow",
        "--ttft-slo-ms",
        "1000",
        "--tenants",
        "2",
        "--batch-share",
        "0.2",
        "--slots-per-replica",
        "8",
    ]))
    .unwrap();
    let labels: Vec<&str> = reports.iter().map(|r| r.summary.policy.as_str()).collect();
    assert_eq!(labels, ["warm/fcfs", "warm/flow"]);
    let fcfs = reports[0].summary.admission.as_ref().unwrap();
    let flow = reports[1].summary.admission.as_ref().unwrap();
    assert_eq!((fcfs.mode.as_str(), flow.mode.as_str()), ("fcfs", "flow"));
    assert_eq!(
        flow.groups.len(),
        4,
        "2 tenants x 2 classes: {:?}",
        flow.groups
    );
    for a in [fcfs, flow] {
        let sent: usize = a.groups.iter().map(|g| g.requests).sum();
        assert_eq!(sent, 300);
        assert!(a.met <= sent - a.refused);
    }
    assert!(
        flow.goodput_per_s > 2.0 * fcfs.goodput_per_s,
        "flow {} vs fcfs {} requests/s within the objective",
        flow.goodput_per_s,
        fcfs.goodput_per_s
    );
    for g in &flow.groups {
        if g.class == "batch" {
            assert_eq!(g.refused, 0, "batch waits, it is never shed: {g:?}");
        } else {
            let done = g.requests - g.refused;
            assert!(
                g.met * 10 >= done * 9,
                "admitted interactive requests meet it: {g:?}"
            );
        }
    }
}

/// The reserve (`--flow-reserve-per-replica`, the gateway's
/// `admission.flow.reserve_per_replica`): with batch work holding every slot, an
/// interactive request goes past the full replica instead of waiting for a batch request
/// to end, so interactive TTFT falls; batch is still all served.
#[test]
fn the_reserve_lets_interactive_work_past_batch_in_flight() {
    let run = |reserve: &str| {
        let reports = loadtest::simulate_cmd::run(&args(&[
            "--workload",
            "mixed",
            "--replicas",
            "2",
            "--request-rate",
            "2",
            "--num-prompts",
            "200",
            "--seed",
            "3",
            "--policy",
            "warm",
            "--admission",
            "flow",
            "--batch-share",
            "0.6",
            "--slots-per-replica",
            "1",
            "--flow-max-queued",
            "1000",
            "--flow-max-queued-per-tenant",
            "1000",
            "--flow-reserve-per-replica",
            reserve,
        ]))
        .unwrap();
        reports[0].summary.admission.clone().unwrap()
    };
    let (without, with) = (run("0"), run("1"));
    let interactive_p99 = |a: &loadtest::metrics::admission::AdmissionSummary| {
        a.groups
            .iter()
            .filter(|g| g.class == "interactive")
            .map(|g| g.p99_ttft_ms)
            .fold(0.0, f64::max)
    };
    for a in [&without, &with] {
        for g in a.groups.iter().filter(|g| g.class == "batch") {
            assert_eq!((g.refused, g.completed), (0, g.requests), "{g:?}");
        }
    }
    assert!(
        interactive_p99(&with) * 2.0 < interactive_p99(&without),
        "interactive p99 {} ms with the reserve, {} ms without",
        interactive_p99(&with),
        interactive_p99(&without)
    );
}

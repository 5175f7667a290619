#![allow(clippy::unwrap_used)]
//! Flow control (issue 42): when the replica's slots are taken, requests wait in their
//! tenant's queue and are dispatched by weight, class and deadline. Dispatch order is
//! read from the order the (hanging, then released) mock replica received the requests,
//! never from wall-clock timing. The queue's tests turn the reserve off
//! (`reserve_per_replica: 0`), so every request waits for the one slot; the reserve's
//! tests turn it on.

use std::thread::JoinHandle;
use std::time::{Duration, Instant};
use warmpath_e2e::fixtures::{chat, replicas_yaml};
use warmpath_e2e::http::{post_json, HttpResponse};
use warmpath_e2e::mock::{MockReplica, Mode};
use warmpath_e2e::GatewayProc;

/// A gateway with one slot on one mock replica, no reserve, and the given tenants
/// `(id, key, flow)`.
fn gateway(mock: &MockReplica, tenants: &[(&str, &str, &str)], admission: &str) -> GatewayProc {
    gateway_with_reserve(mock, tenants, admission, 0)
}

/// [`gateway`] with `reserve` slots past the cap for requests that outrank the work in
/// flight.
fn gateway_with_reserve(
    mock: &MockReplica,
    tenants: &[(&str, &str, &str)],
    admission: &str,
    reserve: u32,
) -> GatewayProc {
    let mut y =
        String::from("auth: {enabled: true, salt_secret: e2e-salt-secret-0123456789}\ntenants:\n");
    for (id, key, flow) in tenants {
        y.push_str(&format!(
            "  - id: {id}\n    api_key_sha256: [{}]\n    models: [\"*\"]\n    flow: {{{flow}}}\n",
            gateway::hash_key(key)
        ));
    }
    y.push_str(&replicas_yaml(&[mock.url()]));
    y.push_str(&format!(
        "admission: {{max_in_flight_per_replica: 1, queue_timeout_ms: 30000, \
         flow: {{reserve_per_replica: {reserve}}}{admission}}}\n\
         timeouts: {{first_token_ms: 30000}}\n"
    ));
    GatewayProc::spawn(&y, &[], 1).expect("gateway")
}

/// Sends a chat whose user message is `tag` from a thread.
fn send(
    gw: &GatewayProc,
    key: &str,
    tag: &str,
    headers: &[(&str, &str)],
) -> JoinHandle<HttpResponse> {
    let addr = gw.addr.clone();
    let auth = format!("Bearer {key}");
    let tag = tag.to_string();
    let headers: Vec<(String, String)> = headers
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    std::thread::spawn(move || {
        let mut h: Vec<(&str, &str)> = vec![("Authorization", auth.as_str())];
        h.extend(headers.iter().map(|(k, v)| (k.as_str(), v.as_str())));
        post_json(
            &addr,
            "/v1/chat/completions",
            &h,
            &chat("mock", "s", &tag, 2, false),
        )
        .unwrap()
    })
}

/// The sum of the series of `name` whose labels contain every one of `labels`.
fn metric_sum(gw: &GatewayProc, name: &str, labels: &[&str]) -> f64 {
    gw.metrics()
        .unwrap_or_default()
        .lines()
        .filter(|l| l.starts_with(name) && labels.iter().all(|x| l.contains(x)))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

/// Waits until `n` requests wait in the gateway's queue (the event the test orders on).
fn wait_queued(gw: &GatewayProc, n: usize) {
    let until = Instant::now() + Duration::from_secs(30);
    loop {
        let q = metric_sum(gw, "warmpath_gateway_queued_requests", &[]);
        if q as usize == n {
            return;
        }
        assert!(
            Instant::now() < until,
            "{q} queued, waiting for {n}\n{}",
            gw.log()
        );
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Waits until the mock has received `n` generation requests.
fn wait_received(mock: &MockReplica, n: usize) {
    let until = Instant::now() + Duration::from_secs(30);
    while mock.generations() < n {
        assert!(
            Instant::now() < until,
            "mock got {} of {n}",
            mock.generations()
        );
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// The user messages in the order the mock received them.
fn dispatch_order(mock: &MockReplica) -> Vec<String> {
    mock.bodies()
        .iter()
        .map(|b| {
            let v: serde_json::Value = serde_json::from_slice(b).unwrap();
            v["messages"][1]["content"].as_str().unwrap().to_string()
        })
        .collect()
}

#[test]
fn a_burst_tenant_does_not_delay_the_light_tenant_dispatch() {
    let mock = MockReplica::start(Mode::Hang);
    let gw = gateway(
        &mock,
        &[("a", "key-a", "weight: 1"), ("b", "key-b", "weight: 1")],
        "",
    );
    // A holds the one slot, then queues a burst of 8.
    let mut handles = vec![send(&gw, "key-a", "a0", &[])];
    wait_received(&mock, 1);
    for i in 1..=8 {
        handles.push(send(&gw, "key-a", &format!("a{i}"), &[]));
    }
    wait_queued(&gw, 8);
    handles.push(send(&gw, "key-b", "b0", &[]));
    wait_queued(&gw, 9);
    mock.set_mode(Mode::Ok);
    for h in handles {
        assert_eq!(h.join().unwrap().status, 200);
    }
    let order = dispatch_order(&mock);
    let b = order.iter().position(|t| t == "b0").unwrap();
    // First come, first served would send b0 tenth (index 9); fair sharing sends it
    // right after the request that held the slot, or after at most one more of A's.
    assert!(b <= 2, "b0 dispatched at {b}: {order:?}");
    assert!(
        metric_sum(
            &gw,
            "warmpath_gateway_flow_queue_seconds_count",
            &["tenant=\"b\""]
        ) >= 1.0
    );
}

#[test]
fn weights_share_the_slot_by_weight() {
    let mock = MockReplica::start(Mode::Hang);
    let gw = gateway(
        &mock,
        &[("h", "key-h", "weight: 3"), ("l", "key-l", "weight: 1")],
        "",
    );
    let mut handles = vec![send(&gw, "key-h", "h-hold", &[])];
    wait_received(&mock, 1);
    for i in 0..8 {
        handles.push(send(&gw, "key-h", &format!("h{i}"), &[]));
        wait_queued(&gw, 2 * i + 1);
        handles.push(send(&gw, "key-l", &format!("l{i}"), &[]));
        wait_queued(&gw, 2 * i + 2);
    }
    mock.set_mode(Mode::Ok);
    for h in handles {
        assert_eq!(h.join().unwrap().status, 200);
    }
    // Same prompts, same cost: of the first 8 dispatched after the holder, 6 are h's.
    let order = dispatch_order(&mock);
    let heavy = order[1..9].iter().filter(|t| t.starts_with('h')).count();
    assert!(
        (5..=7).contains(&heavy),
        "{heavy} of 8 to weight 3: {order:?}"
    );
}

#[test]
fn interactive_goes_before_batch_and_a_disallowed_class_is_refused() {
    let mock = MockReplica::start(Mode::Hang);
    let gw = gateway(
        &mock,
        &[
            ("t", "key-t", "classes: [interactive, batch]"),
            ("i", "key-i", "classes: [interactive]"),
        ],
        "",
    );
    let mut handles = vec![send(&gw, "key-t", "hold", &[])];
    wait_received(&mock, 1);
    for i in 0..3 {
        handles.push(send(
            &gw,
            "key-t",
            &format!("batch{i}"),
            &[("x-priority", "batch")],
        ));
        wait_queued(&gw, i + 1);
    }
    handles.push(send(
        &gw,
        "key-t",
        "inter",
        &[("x-priority", "interactive")],
    ));
    wait_queued(&gw, 4);
    // A key whose tenant may not use batch: 403, and an unknown class: 400.
    let refused = send(&gw, "key-i", "nope", &[("x-priority", "batch")])
        .join()
        .unwrap();
    assert_eq!(refused.status, 403, "{}", refused.text());
    assert_eq!(
        refused.json().unwrap()["error"]["code"],
        "priority_not_allowed"
    );
    let bad = send(&gw, "key-t", "bad", &[("x-priority", "urgent")])
        .join()
        .unwrap();
    assert_eq!(bad.status, 400, "{}", bad.text());
    mock.set_mode(Mode::Ok);
    for h in handles {
        assert_eq!(h.join().unwrap().status, 200);
    }
    let order = dispatch_order(&mock);
    assert_eq!(order[..2], ["hold", "inter"], "{order:?}");
    assert_eq!(
        order.len(),
        5,
        "refused requests never reach the replica: {order:?}"
    );
}

#[test]
fn an_objective_the_wait_uses_up_is_shed_with_503_but_batch_waits() {
    let mock = MockReplica::start(Mode::Hang);
    let gw = gateway(&mock, &[("t", "key-t", "")], "");
    let hold = send(&gw, "key-t", "hold", &[]);
    wait_received(&mock, 1);
    let batch = send(
        &gw,
        "key-t",
        "batch",
        &[("x-priority", "batch"), ("x-slo-ttft-ms", "200")],
    );
    wait_queued(&gw, 1);
    let started = Instant::now();
    let late = send(&gw, "key-t", "late", &[("x-slo-ttft-ms", "200")])
        .join()
        .unwrap();
    assert_eq!(late.status, 503, "{}", late.text());
    let e = late.json().unwrap();
    assert_eq!(e["error"]["code"], "deadline_unmeetable");
    assert_eq!(e["error"]["type"], "server_error");
    assert!(late.header("retry-after").is_some());
    // Shed when its objective ran out, not after the 30 s queue timeout.
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "{:?}",
        started.elapsed()
    );
    let shed = metric_sum(
        &gw,
        "warmpath_gateway_flow_shed_total",
        &["tenant=\"t\"", "class=\"interactive\""],
    );
    assert_eq!(shed, 1.0);
    // The decision log shows it, and why: shed after its decision, sent nowhere.
    let log = gw.admin_get("/admin/decisions").unwrap().json().unwrap();
    let sheds: Vec<_> = log
        .as_array()
        .unwrap()
        .iter()
        .filter(|d| d.get("shed").is_some())
        .collect();
    assert_eq!(sheds.len(), 1, "{log:#}");
    assert_eq!(sheds[0]["shed"], "deadline_unmeetable");
    assert!(
        sheds[0]["queued_ms"].as_u64().unwrap() > 0,
        "it waited first: {log:#}"
    );
    let bad = send(&gw, "key-t", "bad", &[("x-slo-ttft-ms", "soon")])
        .join()
        .unwrap();
    assert_eq!(bad.status, 400);
    mock.set_mode(Mode::Ok);
    assert_eq!(hold.join().unwrap().status, 200);
    assert_eq!(
        batch.join().unwrap().status,
        200,
        "batch is never shed for its objective"
    );
    assert_eq!(dispatch_order(&mock), ["hold", "batch"]);
    // The batch request waited past its objective: counted, and as missed.
    let missed = metric_sum(
        &gw,
        "warmpath_gateway_flow_objective_total",
        &["class=\"batch\"", "outcome=\"missed\""],
    );
    assert_eq!(missed, 1.0);
}

#[test]
fn full_queues_answer_429_for_the_tenant_and_503_for_the_gateway() {
    let mock = MockReplica::start(Mode::Hang);
    let gw = gateway(
        &mock,
        &[("a", "key-a", "max_queued: 2"), ("b", "key-b", "")],
        ", max_queue: 3",
    );
    let mut handles = vec![send(&gw, "key-a", "hold", &[])];
    wait_received(&mock, 1);
    for i in 0..2 {
        handles.push(send(&gw, "key-a", &format!("a{i}"), &[]));
        wait_queued(&gw, i + 1);
    }
    let own = send(&gw, "key-a", "a-over", &[]).join().unwrap();
    assert_eq!(own.status, 429, "{}", own.text());
    assert_eq!(own.json().unwrap()["error"]["code"], "tenant_queue_full");
    assert_eq!(own.header("retry-after"), Some("1"));
    // Another tenant still gets in, until the gateway-wide bound.
    handles.push(send(&gw, "key-b", "b0", &[]));
    wait_queued(&gw, 3);
    let full = send(&gw, "key-b", "b-over", &[]).join().unwrap();
    assert_eq!(full.status, 503, "{}", full.text());
    assert_eq!(full.json().unwrap()["error"]["code"], "overloaded");
    assert!(full.header("retry-after").is_some());
    let tenant_full = metric_sum(
        &gw,
        "warmpath_gateway_flow_shed_total",
        &["reason=\"tenant_queue_full\""],
    );
    assert_eq!(tenant_full, 1.0);
    mock.set_mode(Mode::Ok);
    for h in handles {
        assert_eq!(h.join().unwrap().status, 200);
    }
    assert_eq!(mock.generations(), 4);
}

#[test]
fn a_light_tenant_takes_a_reserve_slot_past_a_burst_that_holds_the_replica() {
    let mock = MockReplica::start(Mode::Hang);
    let gw = gateway_with_reserve(
        &mock,
        &[("a", "key-a", "weight: 1"), ("b", "key-b", "weight: 1")],
        "",
        1,
    );
    // A holds the one slot and queues three more: a tenant at or above its share never
    // takes the reserve, so they wait.
    let mut handles = vec![send(&gw, "key-a", "a0", &[])];
    wait_received(&mock, 1);
    for i in 1..=3 {
        handles.push(send(&gw, "key-a", &format!("a{i}"), &[]));
        wait_queued(&gw, i);
    }
    // B holds nothing, below its half: it goes to the full replica at once.
    handles.push(send(&gw, "key-b", "b0", &[]));
    wait_received(&mock, 2);
    // The reserve is one slot, now taken: B's next request waits with A's three (which
    // were still waiting when b0 went).
    handles.push(send(&gw, "key-b", "b1", &[]));
    wait_queued(&gw, 4);
    std::thread::sleep(Duration::from_millis(200));
    assert_eq!(mock.generations(), 2, "{:?}", dispatch_order(&mock));
    mock.set_mode(Mode::Ok);
    for h in handles {
        assert_eq!(h.join().unwrap().status, 200);
    }
    let order = dispatch_order(&mock);
    assert_eq!(order[..2], ["a0", "b0"], "{order:?}");
    assert_eq!(order.len(), 6, "{order:?}");
}

#[test]
fn an_interactive_request_takes_a_reserve_slot_while_batch_runs_and_batch_never_does() {
    let mock = MockReplica::start(Mode::Hang);
    let gw = gateway_with_reserve(
        &mock,
        &[("t", "key-t", "classes: [interactive, batch]")],
        "",
        1,
    );
    let batch = [("x-priority", "batch")];
    let mut handles = vec![send(&gw, "key-t", "batch0", &batch)];
    wait_received(&mock, 1);
    // Batch outranks nothing: it waits for the slot.
    handles.push(send(&gw, "key-t", "batch1", &batch));
    wait_queued(&gw, 1);
    // Interactive outranks the batch request in flight (same tenant or not).
    handles.push(send(&gw, "key-t", "inter0", &[]));
    wait_received(&mock, 2);
    // The one reserve slot is taken: the next interactive request waits.
    handles.push(send(&gw, "key-t", "inter1", &[]));
    wait_queued(&gw, 2);
    std::thread::sleep(Duration::from_millis(200));
    assert_eq!(mock.generations(), 2, "{:?}", dispatch_order(&mock));
    mock.set_mode(Mode::Ok);
    for h in handles {
        assert_eq!(h.join().unwrap().status, 200);
    }
    let order = dispatch_order(&mock);
    assert_eq!(order[..2], ["batch0", "inter0"], "{order:?}");
    // When the slots free, interactive still goes before batch.
    let i1 = order.iter().position(|t| t == "inter1").unwrap();
    let b1 = order.iter().position(|t| t == "batch1").unwrap();
    assert!(i1 < b1, "{order:?}");
}

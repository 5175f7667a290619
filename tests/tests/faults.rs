#![allow(clippy::unwrap_used)]
//! Faults: a replica killed before the first byte (retried elsewhere), killed mid-stream
//! (terminal error event, never [DONE]), and hung (ejected, later re-admitted).

use std::time::{Duration, Instant};
use warmpath_e2e::fixtures::{chat, model_of, replicas_yaml};
use warmpath_e2e::http::{get, post_json, post_sse};
use warmpath_e2e::mock::{MockReplica, Mode};
use warmpath_e2e::{GatewayProc, ReplicaProc};

fn metric(gw: &GatewayProc, name: &str) -> f64 {
    let text = get(&gw.admin, "/metrics", &[]).unwrap().text();
    text.lines()
        .filter(|l| l.starts_with(name))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

#[test]
fn replica_killed_before_first_byte_is_retried_on_another() {
    let mut replicas: Vec<ReplicaProc> = (0..2)
        .map(|_| ReplicaProc::spawn("dummy:tiny").expect("replica"))
        .collect();
    let model = model_of(&replicas[0].addr);
    let urls: Vec<String> = replicas.iter().map(ReplicaProc::url).collect();
    let yaml = format!("auth: {{enabled: false}}\n{}", replicas_yaml(&urls));
    let gw = GatewayProc::spawn(&yaml, &[], 2).expect("gateway");
    let system = "A long shared system prompt that makes the prefix worth routing on. ".repeat(8);
    let first = post_json(
        &gw.addr,
        "/v1/chat/completions",
        &[],
        &chat(&model, &system, "q1", 2, false),
    )
    .unwrap();
    assert_eq!(first.status, 200);
    let holder = first.header("x-warmpath-replica").unwrap().to_string();
    let list = gw.replicas().unwrap();
    let holder_url = list
        .as_array()
        .unwrap()
        .iter()
        .find(|r| format!("r{}", r["id"]) == holder)
        .unwrap()["url"]
        .as_str()
        .unwrap()
        .to_string();
    // Kill the replica that holds the prefix: the policy still prefers it (cache hit),
    // the connection is refused, and the request is retried on the other one.
    replicas
        .iter_mut()
        .find(|r| r.url() == holder_url)
        .unwrap()
        .kill();
    let retries_before = metric(&gw, "warmpath_gateway_retries_total");
    for i in 0..3 {
        let r = post_json(
            &gw.addr,
            "/v1/chat/completions",
            &[],
            &chat(&model, &system, &format!("after kill {i}"), 2, false),
        )
        .unwrap();
        assert_eq!(r.status, 200, "{}", r.text());
        assert_ne!(
            r.header("x-warmpath-replica").unwrap(),
            holder,
            "served by the dead replica?"
        );
    }
    assert!(
        metric(&gw, "warmpath_gateway_retries_total") > retries_before,
        "the dead holder should have been tried, then another"
    );
}

#[test]
fn replica_killed_mid_stream_ends_with_an_error_event() {
    let mock = MockReplica::start(Mode::CrashMidStream);
    let yaml = format!("auth: {{enabled: false}}\n{}", replicas_yaml(&[mock.url()]));
    let gw = GatewayProc::spawn(&yaml, &[], 1).expect("gateway");
    let sse = post_sse(
        &gw.addr,
        "/v1/chat/completions",
        &[],
        &chat("mock", "s", "u", 8, true),
    )
    .unwrap();
    assert_eq!(sse.status, 200);
    assert!(sse.events.len() >= 3, "{:?}", sse.events);
    let last = sse.events.last().unwrap();
    assert!(
        last.contains("\"error\""),
        "last event is not an error: {last}"
    );
    assert!(
        !sse.events.iter().any(|e| e == "[DONE]"),
        "a broken stream must not end with [DONE]"
    );
    // The two content chunks before the crash were forwarded as they came.
    assert_eq!(
        sse.events
            .iter()
            .filter(|e| e.contains("chat.completion.chunk"))
            .count(),
        2
    );
}

#[test]
fn hung_replica_is_ejected_and_readmitted() {
    let good = MockReplica::start(Mode::Ok);
    let hung = MockReplica::start(Mode::Hang);
    let yaml = format!(
        "auth: {{enabled: false}}\n{}\
         health: {{probe_interval_ms: 200, probe_timeout_ms: 300, eject_after_failures: 2, ejection_ms: 1000, max_ejected_ratio: 0.1}}\n\
         timeouts: {{first_token_ms: 500, idle_ms: 500}}\n",
        replicas_yaml(&[good.url(), hung.url()])
    );
    let gw = GatewayProc::spawn(&yaml, &[], 2).expect("gateway");
    let state_of = |url: &str| -> String {
        gw.replicas()
            .unwrap()
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["url"] == url)
            .unwrap()["health"]["state"]
            .as_str()
            .unwrap()
            .to_string()
    };
    // Requests keep succeeding (a hang before the first byte is retried on the good one).
    for i in 0..4 {
        let r = post_json(
            &gw.addr,
            "/v1/chat/completions",
            &[],
            &chat("mock", "s", &format!("u{i}"), 2, false),
        )
        .unwrap();
        assert_eq!(r.status, 200, "{}", r.text());
    }
    let deadline = Instant::now() + Duration::from_secs(10);
    while state_of(&hung.url()) != "ejected" {
        assert!(Instant::now() < deadline, "hung replica was never ejected");
        std::thread::sleep(Duration::from_millis(100));
    }
    assert_eq!(
        state_of(&good.url()),
        "healthy",
        "at least one replica must stay in"
    );
    hung.set_mode(Mode::Ok);
    let deadline = Instant::now() + Duration::from_secs(15);
    while state_of(&hung.url()) != "healthy" {
        assert!(
            Instant::now() < deadline,
            "recovered replica was never re-admitted"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    assert!(metric(&gw, "warmpath_gateway_ejections_total") >= 1.0);
    assert!(metric(&gw, "warmpath_gateway_readmissions_total") >= 1.0);
}

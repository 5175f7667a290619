#![allow(clippy::unwrap_used)]
//! Degenerate output (issue #25, matrix row C11): NaN logits, forced by the replica's
//! hidden test hook `--fault-nan-logits-after N`, end the request with an error (500
//! OpenAI error JSON, or a terminal SSE error event and never `[DONE]`); the replica
//! counts it and keeps serving; the gateway passes the error on and counts the request as
//! failed against that replica.

use std::time::{Duration, Instant};
use warmpath_e2e::fixtures::{chat, model_of, replicas_yaml};
use warmpath_e2e::http::{get, post_json, post_sse};
use warmpath_e2e::{GatewayProc, LoggedReplica};

fn yaml(replica: &LoggedReplica) -> String {
    format!(
        "auth: {{enabled: false}}\n{}",
        replicas_yaml(&[replica.proc.url()])
    )
}

fn degenerate_total(addr: &str) -> u64 {
    let text = get(addr, "/metrics", &[]).unwrap().text();
    text.lines()
        .find_map(|l| l.strip_prefix("warmpath_replica_degenerate_total "))
        .map(|v| v.trim().parse::<f64>().unwrap() as u64)
        .expect("degenerate metric")
}

#[test]
fn nan_logits_fail_the_request_and_the_replica_keeps_serving() {
    let replica =
        LoggedReplica::spawn("dummy:tiny", &["--fault-nan-logits-after", "0"]).expect("replica");
    let gw = GatewayProc::spawn(&yaml(&replica), &[], 1).expect("gateway");
    let model = model_of(&replica.proc.addr);
    assert_eq!(degenerate_total(&replica.proc.addr), 0);

    let r = post_json(
        &gw.addr,
        "/v1/chat/completions",
        &[],
        &chat(&model, "s", "first", 4, false),
    )
    .unwrap();
    assert_eq!(r.status, 500, "{}", r.text());
    let v = r.json().unwrap();
    let msg = v["error"]["message"].as_str().unwrap();
    assert!(msg.contains("degenerate"), "{v}");
    assert_eq!(v["error"]["type"], "server_error", "{v}");
    assert_eq!(degenerate_total(&replica.proc.addr), 1);

    // The replica stays healthy: the next request is served.
    let r = post_json(
        &gw.addr,
        "/v1/chat/completions",
        &[],
        &chat(&model, "s", "second", 4, false),
    )
    .unwrap();
    assert_eq!(r.status, 200, "{}", r.text());
    // The gateway logged the failed request against the replica (its log is batched).
    let deadline = Instant::now() + Duration::from_secs(30);
    while !gw
        .log()
        .lines()
        .any(|l| l.contains("replica=\"r0\"") && l.contains("status=500"))
    {
        assert!(
            Instant::now() < deadline,
            "no failed request line in the gateway log:\n{}",
            gw.log()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn nan_logits_end_a_stream_with_an_error_event_never_done() {
    let replica =
        LoggedReplica::spawn("dummy:tiny", &["--fault-nan-logits-after", "0"]).expect("replica");
    let gw = GatewayProc::spawn(&yaml(&replica), &[], 1).expect("gateway");
    let model = model_of(&replica.proc.addr);
    let sse = post_sse(
        &gw.addr,
        "/v1/chat/completions",
        &[],
        &chat(&model, "s", "streamed", 4, true),
    )
    .unwrap();
    assert_eq!(sse.status, 200);
    assert!(
        !sse.events.iter().any(|e| e == "[DONE]"),
        "{:?}",
        sse.events
    );
    assert!(
        sse.events
            .iter()
            .any(|e| e.contains("\"error\"") && e.contains("degenerate")),
        "no degenerate error event: {:?}",
        sse.events
    );
    assert_eq!(degenerate_total(&replica.proc.addr), 1);
    // The next stream completes.
    let sse = post_sse(
        &gw.addr,
        "/v1/chat/completions",
        &[],
        &chat(&model, "s", "again", 4, true),
    )
    .unwrap();
    assert_eq!(sse.status, 200);
    assert_eq!(sse.events.last().map(String::as_str), Some("[DONE]"));
    assert!(replica.log().contains("degenerate output"));
}

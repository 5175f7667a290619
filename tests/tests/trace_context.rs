#![allow(clippy::unwrap_used)]
//! Trace context end to end (issue #25): one request followed across both logs. The
//! gateway continues the client's `traceparent` (its request id is the trace id) and sends
//! its own to the replica, which logs the trace id on the request's log lines.

use std::time::{Duration, Instant};
use warmpath_e2e::fixtures::{chat, model_of, replicas_yaml};
use warmpath_e2e::http::post_json;
use warmpath_e2e::{GatewayProc, LoggedReplica};

fn yaml(replica: &LoggedReplica) -> String {
    format!(
        "auth: {{enabled: false}}\n{}",
        replicas_yaml(&[replica.proc.url()])
    )
}

/// Polls `log` until it holds `needle` (logs are written in batches), up to 30 s.
fn wait_for(what: &str, needle: &str, log: impl Fn() -> String) {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let text = log();
        if text.contains(needle) {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "{needle} never appeared in the {what} log:\n{text}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn one_trace_id_in_the_gateway_and_the_replica_logs() {
    let replica = LoggedReplica::spawn("dummy:tiny", &[]).expect("replica");
    let gw = GatewayProc::spawn(&yaml(&replica), &[], 1).expect("gateway");
    let model = model_of(&replica.proc.addr);

    // The client's trace is continued: its trace id names the request in both logs.
    let client_trace = "4bf92f3577b34da6a3ce929d0e0e4736";
    let r = post_json(
        &gw.addr,
        "/v1/chat/completions",
        &[(
            "traceparent",
            &format!("00-{client_trace}-00f067aa0ba902b7-01"),
        )],
        &chat(&model, "s", "traced", 2, false),
    )
    .unwrap();
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(r.header("x-request-id"), Some(client_trace));
    wait_for("gateway", client_trace, || gw.log());
    wait_for("replica", &format!("trace_id={client_trace}"), || {
        replica.log()
    });

    // Without one, the gateway starts a trace: its request id reaches the replica too.
    let r = post_json(
        &gw.addr,
        "/v1/chat/completions",
        &[],
        &chat(&model, "s", "untraced", 2, true),
    )
    .unwrap();
    assert_eq!(r.status, 200, "{}", r.text());
    let id = r.header("x-request-id").expect("request id").to_string();
    assert_eq!(id.len(), 32, "{id}");
    wait_for("gateway", &id, || gw.log());
    wait_for("replica", &format!("trace_id={id}"), || replica.log());
}

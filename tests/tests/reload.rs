#![allow(clippy::unwrap_used)]
//! Operations: SIGHUP reloads the config (tenant keys here) without a restart; a broken
//! config is rejected and the running one kept; a reload keeps each tenant's limiter state
//! (spent request allowance, requests in flight), issue #25 defect 6.

use std::time::{Duration, Instant};
use warmpath_e2e::fixtures::{auth_yaml, chat, replicas_yaml};
use warmpath_e2e::http::{post_json, raw};
use warmpath_e2e::mock::{MockReplica, Mode};
use warmpath_e2e::GatewayProc;

fn status_with(gw: &GatewayProc, key: &str) -> u16 {
    let auth = format!("Bearer {key}");
    post_json(
        &gw.addr,
        "/v1/chat/completions",
        &[("Authorization", auth.as_str())],
        &chat("mock", "s", "u", 2, false),
    )
    .unwrap()
    .status
}

fn rewrite(gw: &GatewayProc, body: &str) {
    let old = std::fs::read_to_string(&gw.config_path).unwrap();
    let head: String = old.lines().take(2).map(|l| format!("{l}\n")).collect();
    std::fs::write(&gw.config_path, format!("{head}{body}")).unwrap();
    gw.signal("HUP");
}

#[test]
fn sighup_reloads_tenants_and_rejects_bad_configs() {
    let mock = MockReplica::start(Mode::Ok);
    let reps = replicas_yaml(&[mock.url()]);
    let gw = GatewayProc::spawn(
        &format!("{}{reps}", auth_yaml(&[("t", "key-old", "")])),
        &[],
        1,
    )
    .expect("gateway");
    assert_eq!(status_with(&gw, "key-old"), 200);
    assert_eq!(status_with(&gw, "key-new"), 401);

    rewrite(
        &gw,
        &format!("{}{reps}", auth_yaml(&[("t", "key-new", "")])),
    );
    let deadline = Instant::now() + Duration::from_secs(10);
    while status_with(&gw, "key-new") != 200 {
        assert!(
            Instant::now() < deadline,
            "reload never took effect: {}",
            gw.log()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    assert_eq!(status_with(&gw, "key-old"), 401);

    rewrite(
        &gw,
        &format!(
            "{}{reps}bogus_key: 1\n",
            auth_yaml(&[("t", "key-other", "")])
        ),
    );
    std::thread::sleep(Duration::from_millis(500));
    assert_eq!(
        status_with(&gw, "key-new"),
        200,
        "a bad config must not replace the running one"
    );
    assert!(gw.log().contains("reload rejected"));
}

/// One tenant `t` with `keys` and `limits` (YAML flow mapping body).
fn tenant_yaml(keys: &[&str], limits: &str) -> String {
    let hashes: Vec<String> = keys.iter().map(|k| gateway::hash_key(k)).collect();
    format!(
        "auth: {{enabled: true, salt_secret: e2e-salt-secret-0123456789}}\ntenants:\n  \
         - id: t\n    api_key_sha256: [{}]\n    limits: {{{limits}}}\n",
        hashes.join(", ")
    )
}

/// Polls with `key` until the reload that added it took effect; its first status after.
fn first_status_after_reload(gw: &GatewayProc, key: &str) -> u16 {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let s = status_with(gw, key);
        if s != 401 {
            return s;
        }
        assert!(
            Instant::now() < deadline,
            "reload never took effect: {}",
            gw.log()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn a_reload_keeps_a_spent_request_allowance() {
    let mock = MockReplica::start(Mode::Ok);
    let reps = replicas_yaml(&[mock.url()]);
    let limits = "requests_per_minute: 1, request_burst: 1";
    let gw = GatewayProc::spawn(&format!("{reps}{}", tenant_yaml(&["k1"], limits)), &[], 1)
        .expect("gateway");
    assert_eq!(status_with(&gw, "k1"), 200);
    assert_eq!(status_with(&gw, "k1"), 429);
    // An unrelated change to the tenant: a second key. No fresh burst.
    rewrite(
        &gw,
        &format!("{reps}{}", tenant_yaml(&["k1", "k2"], limits)),
    );
    assert_eq!(
        first_status_after_reload(&gw, "k2"),
        429,
        "a reload granted a fresh burst"
    );
    assert_eq!(status_with(&gw, "k1"), 429);
    // New limits (twice the rate and burst): the spent share stays spent.
    let doubled = "requests_per_minute: 2, request_burst: 2";
    rewrite(
        &gw,
        &format!("{reps}{}", tenant_yaml(&["k1", "k2", "k3"], doubled)),
    );
    assert_eq!(
        first_status_after_reload(&gw, "k3"),
        429,
        "rescaled to a fresh burst"
    );
}

#[test]
fn a_reload_keeps_counting_requests_in_flight() {
    let mock = MockReplica::start(Mode::Ok);
    let reps = replicas_yaml(&[mock.url()]);
    let limits = "max_concurrent: 1";
    let gw = GatewayProc::spawn(&format!("{reps}{}", tenant_yaml(&["k1"], limits)), &[], 1)
        .expect("gateway");
    mock.set_mode(Mode::Hang);
    let before = mock.generations();
    let addr = gw.addr.clone();
    // Holds the tenant's one slot until the gateway gives up on the replica.
    let held = std::thread::spawn(move || {
        let _ = post_json(
            &addr,
            "/v1/chat/completions",
            &[("Authorization", "Bearer k1")],
            &chat("mock", "s", "u", 2, false),
        );
    });
    // Only once it reached the replica is it surely in flight (a probe would hang too).
    let deadline = Instant::now() + Duration::from_secs(20);
    while mock.generations() == before {
        assert!(
            Instant::now() < deadline,
            "the first request never reached the replica"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(status_with(&gw, "k1"), 429, "the slot is held");
    rewrite(
        &gw,
        &format!("{reps}{}", tenant_yaml(&["k1", "k2"], limits)),
    );
    // A second request admitted after the reload would hang on the mock: read it with a
    // deadline, and count a timeout as admitted.
    let deadline = Instant::now() + Duration::from_secs(20);
    let status = loop {
        let req = format!(
            "POST /v1/chat/completions HTTP/1.1\r\nHost: {}\r\nAuthorization: Bearer k2\r\n\
             Content-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{}",
            gw.addr,
            chat("mock", "s", "u", 2, false).to_string().len(),
            chat("mock", "s", "u", 2, false)
        );
        let s = raw(&gw.addr, req.as_bytes(), Duration::from_secs(5)).map_or(0, |r| r.status);
        if s != 401 {
            break s;
        }
        assert!(
            Instant::now() < deadline,
            "reload never took effect: {}",
            gw.log()
        );
        std::thread::sleep(Duration::from_millis(100));
    };
    assert_eq!(
        status, 429,
        "max_concurrent doubled by a reload (0 = admitted and hung)"
    );
    mock.set_mode(Mode::Ok);
    drop(gw);
    let _ = held.join();
}

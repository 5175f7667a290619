#![allow(clippy::unwrap_used)]
//! Tenant limits: GCRA request burst + rate then 429 with Retry-After and x-ratelimit-*;
//! token reservations never admit more than the TPM; tenants never share cache hits.

use std::time::{Duration, Instant};
use warmpath_e2e::fixtures::{auth_yaml, chat, model_of, replicas_yaml};
use warmpath_e2e::http::{get, post_json};
use warmpath_e2e::mock::{MockReplica, Mode};
use warmpath_e2e::{GatewayProc, ReplicaProc};

#[test]
fn request_rate_gets_burst_plus_rate_then_429() {
    let mock = MockReplica::start(Mode::Ok);
    let yaml = format!(
        "{}{}",
        auth_yaml(&[(
            "rpm",
            "key-rpm",
            "requests_per_minute: 60, request_burst: 5"
        )]),
        replicas_yaml(&[mock.url()])
    );
    let gw = GatewayProc::spawn(&yaml, &[], 1).expect("gateway");
    let start = Instant::now();
    let mut ok = 0;
    let mut limited = Vec::new();
    for i in 0..12 {
        let r = post_json(
            &gw.addr,
            "/v1/chat/completions",
            &[("Authorization", "Bearer key-rpm")],
            &chat("mock", "s", &format!("u{i}"), 4, false),
        )
        .unwrap();
        match r.status {
            200 => ok += 1,
            429 => limited.push(r),
            s => panic!("unexpected status {s}: {}", r.text()),
        }
    }
    let elapsed = start.elapsed().as_secs_f64();
    // GCRA: burst 5 at once, then one per second.
    let expected = 5 + elapsed.floor() as usize;
    assert!(
        ok == expected || ok == expected + 1,
        "admitted {ok}, expected {expected} after {elapsed:.2}s"
    );
    assert!(!limited.is_empty());
    for r in &limited {
        let ra: u64 = r
            .header("retry-after")
            .expect("retry-after")
            .parse()
            .unwrap();
        assert!((1..=2).contains(&ra), "retry-after {ra}");
        assert_eq!(r.header("x-ratelimit-limit-requests"), Some("60"));
        assert_eq!(r.header("x-ratelimit-remaining-requests"), Some("0"));
        assert_eq!(r.json().unwrap()["error"]["type"], "rate_limit_error");
    }
    assert_eq!(
        mock.generations(),
        ok,
        "rejected requests must not reach the replica"
    );
}

#[test]
fn token_reservations_never_exceed_the_tpm() {
    let mock = MockReplica::start(Mode::Hang);
    let yaml = format!(
        "{}{}timeouts: {{first_token_ms: 20000}}\n",
        auth_yaml(&[("tpm", "key-tpm", "tokens_per_minute: 3000")]),
        replicas_yaml(&[mock.url()])
    );
    let gw = GatewayProc::spawn(&yaml, &[], 1).expect("gateway");
    let system = "x".repeat(1000);
    // Each request reserves its prompt (~1,020 byte-level tokens) plus max_tokens 100.
    let handles: Vec<_> = (0..5)
        .map(|i| {
            let addr = gw.addr.clone();
            let body = chat("mock", &system, &format!("q{i}"), 100, false);
            std::thread::spawn(move || {
                post_json(
                    &addr,
                    "/v1/chat/completions",
                    &[("Authorization", "Bearer key-tpm")],
                    &body,
                )
                .unwrap()
            })
        })
        .collect();
    std::thread::sleep(Duration::from_millis(1500));
    let admitted_while_hung = mock.generations();
    mock.set_mode(Mode::Ok);
    let results: Vec<_> = handles.into_iter().map(|h| h.join().unwrap()).collect();
    let ok = results.iter().filter(|r| r.status == 200).count();
    let limited: Vec<_> = results.iter().filter(|r| r.status == 429).collect();
    assert_eq!(ok + limited.len(), 5);
    assert_eq!(ok, 2, "3000 TPM admits two reservations of ~1,120 tokens");
    assert_eq!(admitted_while_hung, 2);
    for r in limited {
        assert!(r.header("retry-after").is_some());
        assert_eq!(r.header("x-ratelimit-limit-tokens"), Some("3000"));
        assert_eq!(r.json().unwrap()["error"]["code"], "rate_limit_tokens");
    }
}

#[test]
fn tenants_with_the_same_prompt_never_share_cache_hits() {
    let replica = ReplicaProc::spawn("dummy:tiny").expect("replica");
    let model = model_of(&replica.addr);
    let yaml = format!(
        "{}{}",
        auth_yaml(&[("a", "key-a", ""), ("b", "key-b", "")]),
        replicas_yaml(&[replica.url()])
    );
    let gw = GatewayProc::spawn(&yaml, &[], 1).expect("gateway");
    let system = "Shared system prompt for isolation. ".repeat(12);
    let send = |key: &str| {
        let auth = format!("Bearer {key}");
        let r = post_json(
            &gw.addr,
            "/v1/chat/completions",
            &[
                ("Authorization", auth.as_str()),
                ("x-warmpath-cache-salt", "attacker-chosen"),
            ],
            &chat(&model, &system, "same question", 1, false),
        )
        .unwrap();
        assert_eq!(r.status, 200, "{}", r.text());
        let v = r.json().unwrap();
        (
            v["usage"]["prompt_tokens"].as_u64().unwrap(),
            v["usage"]["prompt_tokens_details"]["cached_tokens"]
                .as_u64()
                .unwrap_or(0),
        )
    };
    let (_, a1) = send("key-a");
    let (prompt, a2) = send("key-a");
    let (_, b1) = send("key-b");
    assert_eq!(a1, 0);
    assert!(
        a2 * 10 >= prompt * 8,
        "same tenant should hit its cache: {a2}/{prompt}"
    );
    assert_eq!(b1, 0, "another tenant must not hit tenant a's cache");

    // Per-tenant token accounting follows the replicas' usage; control endpoints are not
    // API traffic and never appear as a tenant-less request.
    assert_eq!(get(&gw.addr, "/health", &[]).unwrap().status, 200);
    assert_eq!(get(&gw.addr, "/ready", &[]).unwrap().status, 200);
    let text = get(&gw.admin, "/metrics", &[]).unwrap().text();
    let series = |labels: &str| -> u64 {
        let name = format!("warmpath_gateway_tenant_tokens_total{{{labels}}}");
        text.lines()
            .find(|l| l.starts_with(&name))
            .and_then(|l| l.rsplit(' ').next()?.parse().ok())
            .unwrap_or_else(|| panic!("no series {name} in:\n{text}"))
    };
    assert_eq!(series("kind=\"prompt\",tenant=\"a\""), 2 * prompt);
    assert_eq!(series("kind=\"cached\",tenant=\"a\""), a2);
    assert_eq!(series("kind=\"prompt\",tenant=\"b\""), prompt);
    assert_eq!(series("kind=\"cached\",tenant=\"b\""), 0);
    assert!(series("kind=\"completion\",tenant=\"a\"") >= 2);
    assert!(
        !text.contains("tenant=\"\""),
        "control endpoints counted as tenant-less requests:\n{text}"
    );
}

#[test]
fn the_replica_gets_the_bound_that_was_reserved() {
    let mock = MockReplica::start(Mode::Ok);
    let yaml = format!(
        "{}{}limits: {{default_max_tokens: 33}}\n",
        auth_yaml(&[("t", "key-t", "tokens_per_minute: 1000")]),
        replicas_yaml(&[mock.url()])
    );
    let gw = GatewayProc::spawn(&yaml, &[], 1).expect("gateway");
    let auth = [("Authorization", "Bearer key-t")];
    let unbounded_chat = serde_json::json!({
        "model": "mock", "messages": [{"role": "user", "content": "no bound"}], "stream": true
    });
    let unbounded_text = serde_json::json!({"model": "mock", "prompt": "no bound"});
    let bounded_chat = chat("mock", "s", "bounded", 7, false);
    for (path, body) in [
        ("/v1/chat/completions", &unbounded_chat),
        ("/v1/completions", &unbounded_text),
        ("/v1/chat/completions", &bounded_chat),
    ] {
        let r = post_json(&gw.addr, path, &auth, body).unwrap();
        assert_eq!(r.status, 200, "{}", r.text());
    }
    let bodies: Vec<serde_json::Value> = mock
        .bodies()
        .iter()
        .map(|b| serde_json::from_slice(b).expect("the replica got JSON"))
        .collect();
    assert_eq!(bodies.len(), 3);
    assert_eq!(bodies[0]["max_tokens"], 33, "chat: {}", bodies[0]);
    assert_eq!(bodies[0]["messages"], unbounded_chat["messages"]);
    assert_eq!(bodies[1]["max_tokens"], 33, "completions: {}", bodies[1]);
    assert_eq!(bodies[2], bounded_chat, "a bound given is forwarded as is");

    // A request that needs more tokens than the tenant's whole TPM is a 400 naming the
    // limit, not a 429 it would retry for ever.
    let r = post_json(
        &gw.addr,
        "/v1/chat/completions",
        &auth,
        &chat("mock", "s", "too big", 5000, false),
    )
    .unwrap();
    assert_eq!(r.status, 400, "{}", r.text());
    assert!(r.header("retry-after").is_none());
    let msg = r.json().unwrap()["error"]["message"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(
        msg.contains("tenant t's tokens_per_minute is 1000"),
        "{msg}"
    );
    assert_eq!(mock.generations(), 3);
}

#[test]
fn a_client_that_leaves_before_the_header_is_charged_its_prompt() {
    let mock = MockReplica::start(Mode::Hang);
    let yaml = format!(
        "{}{}timeouts: {{first_token_ms: 20000}}\n",
        auth_yaml(&[("t", "key-t", "tokens_per_minute: 100000")]),
        replicas_yaml(&[mock.url()])
    );
    let gw = GatewayProc::spawn(&yaml, &[], 1).expect("gateway");
    let body = chat("mock", &"x".repeat(1000), "leave early", 10, false).to_string();
    let mut s = std::net::TcpStream::connect(&gw.addr).unwrap();
    std::io::Write::write_all(
        &mut s,
        format!(
            "POST /v1/chat/completions HTTP/1.1\r\nHost: gw\r\nAuthorization: Bearer key-t\r\n\
             Content-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
            body.len()
        )
        .as_bytes(),
    )
    .unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    while mock.generations() < 1 {
        assert!(
            Instant::now() < deadline,
            "the request never reached the replica"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    drop(s);
    // The access log's `request` line says what the tenant was charged.
    let line = request_line(&gw);
    let field = |name: &str| field(&line, name);
    let prompt = field("prompt_tokens=");
    assert!(prompt > 1000, "{line}");
    assert_eq!(field("charged_tokens="), prompt, "{line}");
    assert!(line.contains("status=499"), "{line}");
}

#[test]
fn prompts_sent_to_replicas_that_timed_out_are_charged_once_per_attempt() {
    // Two replicas that take the request and never answer: the first attempt times out,
    // the retry times out too. Each replica ran (or was running) the prefill.
    let a = MockReplica::start(Mode::Hang);
    let b = MockReplica::start(Mode::Hang);
    let yaml = format!(
        "{}{}timeouts: {{first_token_ms: 600}}\nretry: {{max_attempts: 2}}\n",
        auth_yaml(&[("t", "key-t", "tokens_per_minute: 1000000")]),
        replicas_yaml(&[a.url(), b.url()])
    );
    let gw = GatewayProc::spawn(&yaml, &[], 2).expect("gateway");
    let body = chat("mock", &"x".repeat(1000), "time out twice", 10, false);
    let r = post_json(
        &gw.addr,
        "/v1/chat/completions",
        &[("authorization", "Bearer key-t")],
        &body,
    )
    .unwrap();
    assert_eq!(r.status, 504, "{}", r.text());
    assert_eq!(a.generations() + b.generations(), 2, "both replicas got it");
    let line = request_line(&gw);
    let field = |name: &str| field(&line, name);
    let prompt = field("prompt_tokens=");
    assert!(prompt > 1000, "{line}");
    assert_eq!(field("charged_tokens="), 2 * prompt, "{line}");
}

/// The access log's `request` line, once the gateway has written it.
fn request_line(gw: &GatewayProc) -> String {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let log = gw.log();
        if let Some(l) = log.lines().find(|l| l.contains("charged_tokens=")) {
            return l.to_string();
        }
        assert!(Instant::now() < deadline, "no request line in:\n{log}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// The number after `name` in a log line.
fn field(line: &str, name: &str) -> u64 {
    line.split_whitespace()
        .find_map(|f| f.strip_prefix(name)?.parse().ok())
        .unwrap_or_else(|| panic!("no {name} in {line}"))
}

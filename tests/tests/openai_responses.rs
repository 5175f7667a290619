#![allow(clippy::unwrap_used)]
//! The OpenAI Responses API through the gateway, driven by the official OpenAI Python SDK
//! (`tests/python/responses_check.py`) over two Warmpath replicas: a plain response, a
//! streamed one (its text deltas join to the final text, its last event carries usage), and
//! a follow-up naming the first with `previous_response_id`, which goes to the replica that
//! served the first even though the gateway's policy is round robin, and finds its prefix
//! cached there. Malformed requests get OpenAI error JSON with the right status.

use serde_json::{json, Value};
use std::process::Command;
use warmpath_e2e::fixtures::{auth_yaml, model_of, replicas_yaml};
use warmpath_e2e::fleet::metric;
use warmpath_e2e::http::post_json;
use warmpath_e2e::{GatewayProc, ReplicaProc};

const KEY: &str = "sk-responses-test";

fn sdk_run(gw: &GatewayProc, model: &str) -> Value {
    let has_sdk = Command::new("python3")
        .args(["-c", "import openai"])
        .status()
        .is_ok_and(|s| s.success());
    assert!(
        has_sdk,
        "the OpenAI Python SDK is missing: run scripts/ci-deps.sh (pip install openai)"
    );
    let script = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("python/responses_check.py");
    let out = Command::new("python3")
        .arg(script)
        .arg(format!("http://{}/v1", gw.addr))
        .arg(KEY)
        .arg(model)
        .output()
        .expect("run python");
    assert!(
        out.status.success(),
        "responses script failed: {}\n{}",
        String::from_utf8_lossy(&out.stderr),
        gw.log()
    );
    serde_json::from_slice(&out.stdout).expect("json line")
}

/// The replica the decision log names for `request_id`.
fn decided_replica(gw: &GatewayProc, request_id: &str) -> u64 {
    let log = gw
        .admin_get("/admin/decisions?limit=100")
        .unwrap()
        .json()
        .unwrap();
    let rec = log
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["request_id"] == request_id)
        .unwrap_or_else(|| panic!("no decision for {request_id}: {log}"));
    assert_eq!(
        rec["endpoint"], "responses",
        "the client's API is logged: {rec}"
    );
    rec["decision"]["replica"].as_u64().unwrap()
}

#[test]
fn the_openai_sdk_uses_the_responses_api_and_a_follow_up_stays_on_its_replica() {
    let replicas = [
        ReplicaProc::spawn("dummy:tiny").expect("replica"),
        ReplicaProc::spawn("dummy:tiny").expect("replica"),
    ];
    let model = model_of(&replicas[0].addr);
    let urls: Vec<String> = replicas.iter().map(|r| r.url()).collect();
    // Round robin: only the pin keeps a follow-up on its replica.
    let yaml = format!(
        "{}policy: {{type: round_robin}}\n{}",
        auth_yaml(&[("resp", KEY, "")]),
        replicas_yaml(&urls)
    );
    let gw = GatewayProc::spawn(&yaml, &[], 2).expect("gateway");
    let v = sdk_run(&gw, &model);
    eprintln!("{v:#}");

    let first = &v["first"];
    assert!(first["id"].as_str().unwrap().starts_with("resp_"));
    assert_eq!(first["object"], "response");
    assert!(
        matches!(first["status"].as_str(), Some("completed" | "incomplete")),
        "{first}"
    );
    assert_eq!(first["item_types"], json!(["message"]));
    assert!(first["text"].is_string());
    let u = &first["usage"];
    assert!(u["input"].as_u64().unwrap() > 600, "{u}");
    assert!(u["output"].as_u64().unwrap() >= 1);
    assert_eq!(
        u["total"].as_u64().unwrap(),
        u["input"].as_u64().unwrap() + u["output"].as_u64().unwrap()
    );

    let s = &v["stream"];
    let types: Vec<&str> = s["types"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t.as_str().unwrap())
        .collect();
    let last = *types.last().unwrap();
    assert_eq!(
        &types[..4],
        [
            "response.created",
            "response.in_progress",
            "response.output_item.added",
            "response.content_part.added"
        ],
        "{types:?}"
    );
    assert!(
        matches!(last, "response.completed" | "response.incomplete"),
        "{types:?}"
    );
    for kind in [
        "response.output_text.delta",
        "response.output_text.done",
        "response.content_part.done",
        "response.output_item.done",
    ] {
        assert!(types.contains(&kind), "{kind} missing: {types:?}");
    }
    let seqs: Vec<u64> = s["seqs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n.as_u64().unwrap())
        .collect();
    assert_eq!(seqs, (0..seqs.len() as u64).collect::<Vec<_>>());
    assert_eq!(s["deltas"], s["done_text"]);
    assert_eq!(s["deltas"], s["final_text"]);
    assert!(!s["deltas"].as_str().unwrap().is_empty());
    assert!(s["usage"]["input"].as_u64().unwrap() > 600, "{s}");
    assert!(s["usage"]["output"].as_u64().unwrap() >= 1, "{s}");

    let helper = &v["helper"];
    assert_eq!(helper["deltas"], helper["final_text"], "{helper}");
    assert!(!helper["deltas"].as_str().unwrap().is_empty(), "{helper}");

    let f = &v["follow"];
    assert_eq!(f["previous"], first["id"]);
    assert_ne!(f["id"], first["id"]);
    assert_eq!(
        f["replica"], first["replica"],
        "the follow-up goes to the replica that served the first response"
    );
    assert_eq!(
        decided_replica(&gw, f["request_id"].as_str().unwrap()),
        decided_replica(&gw, first["request_id"].as_str().unwrap()),
        "the decision log names the same replica"
    );
    // The whole conversation went upstream: the first turn and its answer before the new
    // question; the first turn's prompt is cached on that replica.
    let fu = &f["usage"];
    assert!(
        fu["input"].as_u64().unwrap() > u["input"].as_u64().unwrap(),
        "{fu} vs {u}"
    );
    let cached = fu["cached"].as_u64().unwrap();
    assert!(
        cached >= 512,
        "cached {cached} of the repeated prefix: {fu}"
    );

    assert_eq!(
        v["unknown"],
        json!({"status": 400, "code": "previous_response_not_found", "param": "previous_response_id"})
    );
}

#[test]
fn malformed_responses_requests_get_openai_errors() {
    let replica = ReplicaProc::spawn("dummy:tiny").expect("replica");
    let model = model_of(&replica.addr);
    let yaml = format!(
        "{}{}",
        auth_yaml(&[("resp", KEY, "")]),
        replicas_yaml(&[replica.url()])
    );
    let gw = GatewayProc::spawn(&yaml, &[], 1).expect("gateway");
    let auth = format!("Bearer {KEY}");
    let h = [("Authorization", auth.as_str())];
    for (body, status, code) in [
        (json!({"input": "x"}), 400, "bad_request"),
        (json!({"model": model, "input": 42}), 400, "bad_request"),
        (
            json!({"model": model, "input": [{"type": "input_image"}]}),
            400,
            "bad_request",
        ),
        (
            json!({"model": model, "input": "x", "previous_response_id": "resp_unknown"}),
            400,
            "previous_response_not_found",
        ),
        (
            json!({"model": "no-such-model", "input": "x"}),
            404,
            "model_not_found",
        ),
    ] {
        let r = post_json(&gw.addr, "/v1/responses", &h, &body).unwrap();
        assert_eq!(r.status, status, "{body}: {}", r.text());
        let e = r.json().unwrap();
        assert_eq!(e["error"]["code"], code, "{body}: {e}");
        assert!(e["error"]["message"].is_string());
        assert!(e["error"]["type"].is_string());
    }
    let r = post_json(
        &gw.addr,
        "/v1/responses",
        &[],
        &json!({"model": model, "input": "x"}),
    )
    .unwrap();
    assert_eq!(r.status, 401, "no key: {}", r.text());
    // The gateway stays up and serves a good request after all of them.
    let ok = post_json(
        &gw.addr,
        "/v1/responses",
        &h,
        &json!({"model": model, "input": "hello", "max_output_tokens": 2}),
    )
    .unwrap();
    assert_eq!(ok.status, 200, "{}", ok.text());
    assert_eq!(ok.json().unwrap()["object"], "response");
    // A tool conversation (function tools, a call and its output as input items) renders
    // through the chat template on both sides and is served.
    let tools = json!({"model": model, "max_output_tokens": 2,
    "tools": [{"type": "function", "name": "weather", "description": "Weather in a city",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}],
    "input": [
        {"role": "user", "content": "Weather in Paris?"},
        {"type": "function_call", "call_id": "call_1", "name": "weather",
            "arguments": "{\"city\":\"Paris\"}"},
        {"type": "function_call_output", "call_id": "call_1", "output": "sunny"},
    ]});
    let r = post_json(&gw.addr, "/v1/responses", &h, &tools).unwrap();
    assert_eq!(r.status, 200, "{}", r.text());
    let v = r.json().unwrap();
    assert_eq!(v["tools"][0]["name"], "weather", "{v}");
    assert!(v["usage"]["input_tokens"].as_u64().unwrap() > 0, "{v}");
    // Counted by API, each request once it has ended (just after its answer went out).
    let series = |status: &str| {
        format!("warmpath_gateway_api_requests_total{{api=\"responses\",status=\"{status}\"}}")
    };
    let want = [("200", 2.0), ("400", 4.0), ("401", 1.0), ("404", 1.0)];
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while want.iter().any(|(s, n)| metric(&gw, &series(s)) < *n) {
        assert!(std::time::Instant::now() < deadline, "{:?}", gw.metrics());
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    for (s, n) in want {
        assert_eq!(metric(&gw, &series(s)), n, "status {s}");
    }
}

/// The URL of the replica `gw` labels `label` (`r0`, ...).
/// `responses.max_records` and `responses.ttl_s` bound what a follow-up can name.
#[test]
fn records_follow_the_configured_bounds() {
    let replica = ReplicaProc::spawn("dummy:tiny").expect("replica");
    let model = model_of(&replica.addr);
    let yaml = format!(
        "{}{}responses:\n  max_records: 1\n  ttl_s: 3\n",
        auth_yaml(&[("resp", KEY, "")]),
        replicas_yaml(&[replica.url()])
    );
    let gw = GatewayProc::spawn(&yaml, &[], 1).expect("gateway");
    let auth = format!("Bearer {KEY}");
    let h = [("Authorization", auth.as_str())];
    let ask = |previous: Option<&str>| {
        let mut body = json!({"model": model, "input": "hello", "max_output_tokens": 2});
        if let Some(id) = previous {
            body["previous_response_id"] = json!(id);
        }
        post_json(&gw.addr, "/v1/responses", &h, &body).unwrap()
    };
    let id_of = |r: &warmpath_e2e::http::HttpResponse| {
        assert_eq!(r.status, 200, "{}", r.text());
        r.json().unwrap()["id"].as_str().unwrap().to_string()
    };
    let first = id_of(&ask(None));
    let second = id_of(&ask(None));
    // One record kept: the first was evicted by the second.
    let r = ask(Some(&first));
    assert_eq!(r.status, 400, "{}", r.text());
    assert_eq!(
        r.json().unwrap()["error"]["code"],
        "previous_response_not_found"
    );
    let third = id_of(&ask(Some(&second)));
    // Past its TTL the newest record is gone too.
    std::thread::sleep(std::time::Duration::from_millis(3500));
    let r = ask(Some(&third));
    assert_eq!(r.status, 400, "expired: {}", r.text());
    assert_eq!(
        r.json().unwrap()["error"]["code"],
        "previous_response_not_found"
    );
}

fn replica_url(gw: &GatewayProc, label: &str) -> String {
    let list = gw.replicas().unwrap();
    let r = list
        .as_array()
        .unwrap()
        .iter()
        .find(|r| format!("r{}", r["id"]) == label)
        .unwrap_or_else(|| panic!("no replica {label}: {list}"));
    r["url"].as_str().unwrap().to_string()
}

/// `previous_response_id` across a fleet: a response made through one gateway is
/// continued through another, which finds its record in the shared Redis (kept with a
/// TTL) and sends the follow-up to the replica that served it; another tenant finds nothing.
#[test]
fn a_follow_up_through_another_gateway_of_the_fleet_finds_the_response_in_redis() {
    let redis = warmpath_e2e::redis::RedisServer::start().expect("redis");
    let replicas = [
        ReplicaProc::spawn("dummy:tiny").expect("replica"),
        ReplicaProc::spawn("dummy:tiny").expect("replica"),
    ];
    let model = model_of(&replicas[0].addr);
    let urls: Vec<String> = replicas.iter().map(|r| r.url()).collect();
    let yaml = format!(
        "{}policy: {{type: round_robin}}\n{}state: {{backend: redis, url: '{}', gateway_count: 2}}\n",
        auth_yaml(&[("resp", KEY, ""), ("other", "sk-other-tenant", "")]),
        replicas_yaml(&urls),
        redis.url()
    );
    let gws = [
        GatewayProc::spawn(&yaml, &[], 2).expect("gateway a"),
        GatewayProc::spawn(&yaml, &[], 2).expect("gateway b"),
    ];
    let auth = format!("Bearer {KEY}");
    let h = [("Authorization", auth.as_str())];
    let instructions = "You answer questions about the Warmpath gateway. ".repeat(12);
    let first = post_json(
        &gws[0].addr,
        "/v1/responses",
        &h,
        &json!({"model": model, "instructions": instructions, "input": "First?",
            "max_output_tokens": 4, "temperature": 0}),
    )
    .unwrap();
    assert_eq!(first.status, 200, "{}", first.text());
    let replica = first.header("x-warmpath-replica").unwrap().to_string();
    let id = first.json().unwrap()["id"].as_str().unwrap().to_string();
    // The record is written off the response's path: wait until Redis holds it.
    // Under the tenant's hash tag (`resp` is the tenant's id here).
    let key = format!("warmpath:{{resp}}:resp:{id}");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while redis.cli(&["EXISTS", &key]).unwrap().trim() != "1" {
        assert!(
            std::time::Instant::now() < deadline,
            "{key} never reached Redis: {}",
            gws[0].log()
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let ttl: i64 = redis.cli(&["PTTL", &key]).unwrap().trim().parse().unwrap();
    assert!(ttl > 0 && ttl <= 3_600_000, "a record expires: PTTL {ttl}");
    // Round robin alternates: once a chat through gateway b lands on the first response's
    // replica, b's policy would send the next request to the other one. Only the pin keeps
    // the follow-up there.
    let target = replica_url(&gws[0], &replica);
    let mut lined_up = false;
    for _ in 0..4 {
        let other = post_json(
            &gws[1].addr,
            "/v1/chat/completions",
            &h,
            &json!({"model": model, "messages": [{"role": "user", "content": "filler"}],
                "max_tokens": 1}),
        )
        .unwrap();
        assert_eq!(other.status, 200, "{}", other.text());
        if replica_url(&gws[1], other.header("x-warmpath-replica").unwrap()) == target {
            lined_up = true;
            break;
        }
    }
    assert!(lined_up, "round robin never reached {target}");
    let follow = post_json(
        &gws[1].addr,
        "/v1/responses",
        &h,
        &json!({"model": model, "instructions": instructions, "input": "Second?",
            "previous_response_id": id, "max_output_tokens": 4, "temperature": 0}),
    )
    .unwrap();
    assert_eq!(follow.status, 200, "{}\n{}", follow.text(), gws[1].log());
    // Each gateway labels replicas in its own registration order: compare their URLs.
    assert_eq!(
        replica_url(&gws[1], follow.header("x-warmpath-replica").unwrap()),
        target,
        "the follow-up goes to the replica that served the first response"
    );
    let v = follow.json().unwrap();
    assert_eq!(v["previous_response_id"], id.as_str());
    let cached = v["usage"]["input_tokens_details"]["cached_tokens"]
        .as_u64()
        .unwrap();
    assert!(cached >= 512, "the first turn's prefix is cached: {v}");
    // Another tenant naming the id finds nothing, through either gateway.
    for gw in &gws {
        let r = post_json(
            &gw.addr,
            "/v1/responses",
            &[("Authorization", "Bearer sk-other-tenant")],
            &json!({"model": model, "input": "Yours?", "previous_response_id": id}),
        )
        .unwrap();
        assert_eq!(r.status, 400, "{}", r.text());
        assert_eq!(
            r.json().unwrap()["error"]["code"],
            "previous_response_not_found"
        );
    }
}

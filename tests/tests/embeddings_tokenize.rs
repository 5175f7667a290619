#![allow(clippy::unwrap_used)]
//! Pass-through APIs (issue 39 items 5 and 6) through the gateway to real upstreams:
//! - `POST /v1/embeddings` to two llama.cpp `llama-server`s started with `--embeddings`
//!   (pool `apis: [embeddings]`): vectors come back, the engine's usage is charged to the
//!   tenant, and the choice is by load (with one server holding a request, the next ones go
//!   to the other). A model with no embedding-capable replica, or whose replica answers
//!   the path 501 (llama-server without `--embeddings`), gets a clear 400; a tenant over
//!   its request rate or token rate gets 429.
//! - `POST /tokenize` and `POST /detokenize` (and the `/v1/` spellings) to Warmpath's
//!   replica serving SmolLM2: text -> tokens -> the same text, and the count equals what
//!   the gateway's own tokenizer counts for the same prompt.

use serde_json::{json, Value};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};
use warmpath_e2e::fixtures::{auth_yaml, model_of, replicas_yaml, smollm2_model};
use warmpath_e2e::http::{post_json, HttpResponse};
use warmpath_e2e::llamacpp::LlamaServer;
use warmpath_e2e::{GatewayProc, ReplicaProc};

const ALIAS: &str = "smollm2";
const KEY: &str = "sk-emb-test";
const RPM_KEY: &str = "sk-emb-rpm";
const TPM_KEY: &str = "sk-emb-tpm";

fn post(addr: &str, key: &str, path: &str, body: &Value) -> HttpResponse {
    let auth = format!("Bearer {key}");
    post_json(addr, path, &[("authorization", &auth)], body).unwrap()
}

fn embed(addr: &str, key: &str, model: &str, input: Value) -> HttpResponse {
    post(
        addr,
        key,
        "/v1/embeddings",
        &json!({"model": model, "input": input}),
    )
}

/// The value of the series `name{labels...}` in a Prometheus text page (0 when absent).
fn metric(page: &str, name: &str, labels: &[&str]) -> f64 {
    page.lines()
        .filter(|l| l.starts_with(name) && l[name.len()..].starts_with('{'))
        .filter(|l| labels.iter().all(|want| l.contains(want)))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

/// The series `name{labels...}` once it reaches `want` (a request's metrics are recorded
/// when it ends, just after its answer is sent), or its value after 10 s.
fn metric_reaching(gw: &GatewayProc, name: &str, labels: &[&str], want: f64) -> f64 {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let v = metric(&gw.metrics().unwrap(), name, labels);
        if v >= want || Instant::now() > deadline {
            return v;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The routing decision of the request `id` (its `x-request-id`).
fn decision(gw: &GatewayProc, id: &str) -> Value {
    let all = gw
        .admin_get("/admin/decisions?limit=50")
        .unwrap()
        .json()
        .unwrap();
    all.as_array()
        .unwrap()
        .iter()
        .find(|d| d["request_id"] == id)
        .unwrap_or_else(|| panic!("no decision for {id}: {all}"))
        .clone()
}

fn error_code(r: &HttpResponse) -> String {
    r.json().unwrap()["error"]["code"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

/// The replica label (`r<id>`) the gateway gave the upstream at `url`.
fn label_of(gw: &GatewayProc, url: &str) -> String {
    let replicas = gw.replicas().unwrap();
    let r = replicas
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["url"].as_str().unwrap().trim_end_matches('/') == url)
        .unwrap_or_else(|| panic!("{url} is not registered: {replicas}"));
    format!("r{}", r["id"])
}

fn in_flight(gw: &GatewayProc, label: &str) -> u64 {
    let replicas = gw.replicas().unwrap();
    replicas
        .as_array()
        .unwrap()
        .iter()
        .find(|r| format!("r{}", r["id"]) == label)
        .map_or(0, |r| r["in_flight"].as_u64().unwrap_or(0))
}

#[test]
fn embeddings_pass_through_to_llama_servers_by_load_under_tenant_limits() {
    let model = smollm2_model();
    let flags = [
        "--embeddings",
        "--pooling",
        "mean",
        "-np",
        "2",
        "-c",
        "2048",
        "-t",
        "1",
    ];
    let a = LlamaServer::spawn(&model, ALIAS, &flags).expect("llama-server a");
    let b = LlamaServer::spawn(&model, ALIAS, &flags).expect("llama-server b");
    // Started without --embeddings, in a pool that says it serves them (a misconfiguration).
    let plain = LlamaServer::spawn(&model, "plain", &["-c", "1024", "-t", "1"]).expect("plain");
    // A Warmpath replica of another model: it serves no embeddings.
    let wp = ReplicaProc::spawn("dummy:tiny").expect("replica");
    let wp_model = model_of(&wp.addr);
    // No ejection while a server is paused below, and no `/metrics` scrape (a scrape that
    // caught b mid-request would report it busy until the next one): the load the test
    // compares is the gateway's own in-flight count.
    let yaml = format!(
        "{}{}health: {{eject_after_failures: 1000}}\n\
         pools:\n  - name: embed\n    engine: llamacpp\n    tokenizer: {{gguf: {model:?}}}\n\
         \x20   metrics: false\n    apis: [embeddings]\n    upstreams: [{}, {}]\n\
         \x20 - name: plain\n    engine: llamacpp\n    tokenizer: {{gguf: {model:?}}}\n\
         \x20   apis: [embeddings]\n    upstreams: [{}]\n",
        auth_yaml(&[
            ("t", KEY, ""),
            ("rpm", RPM_KEY, "requests_per_minute: 1, request_burst: 1"),
            ("tpm", TPM_KEY, "tokens_per_minute: 50"),
        ]),
        replicas_yaml(&[wp.url()]),
        a.url(),
        b.url(),
        plain.url()
    );
    let gw = GatewayProc::spawn(&yaml, &[], 4).expect("gateway");
    let (la, lb) = (label_of(&gw, &a.url()), label_of(&gw, &b.url()));

    // Vectors come back, one per input, and the engine's usage is the tenant's.
    let r = embed(
        &gw.addr,
        KEY,
        ALIAS,
        json!(["The quick brown fox", "jumps over the lazy dog"]),
    );
    assert_eq!(r.status, 200, "{}\n{}", r.text(), gw.log());
    let replica = r.header("x-warmpath-replica").unwrap().to_string();
    assert!(replica == la || replica == lb, "{replica}");
    let v = r.json().unwrap();
    let data = v["data"].as_array().unwrap();
    assert_eq!(data.len(), 2, "{v}");
    let dims: Vec<usize> = data
        .iter()
        .enumerate()
        .map(|(i, d)| {
            assert_eq!(d["index"], i, "{d}");
            let e = d["embedding"].as_array().unwrap();
            assert!(e.iter().all(|x| x.as_f64().is_some_and(f64::is_finite)));
            assert!(
                e.iter().any(|x| x.as_f64() != Some(0.0)),
                "an all-zero vector"
            );
            e.len()
        })
        .collect();
    assert!(dims[0] > 0 && dims[0] == dims[1], "{dims:?}");
    let used = v["usage"]["prompt_tokens"].as_u64().unwrap();
    assert!(used > 0, "{v}");
    let charged = metric_reaching(
        &gw,
        "warmpath_gateway_tenant_tokens_total",
        &["tenant=\"t\"", "kind=\"prompt\""],
        used as f64,
    );
    assert_eq!(charged, used as f64, "the engine's usage is charged");
    let routed = metric_reaching(
        &gw,
        "warmpath_gateway_passthrough_requests_total",
        &["api=\"embeddings\"", "status=\"200\""],
        1.0,
    );
    assert_eq!(routed, 1.0);
    let d = decision(&gw, r.header("x-request-id").unwrap());
    assert_eq!(d["endpoint"], "embeddings", "{d}");
    assert_eq!(d["decision"]["explanation"]["policy"], "passthrough", "{d}");
    assert_eq!(
        d["decision"]["explanation"]["branch"], "least_loaded",
        "{d}"
    );
    assert_eq!(d["blocks"], 0, "nothing is hashed: {d}");
    let reserved = d["prompt_tokens"].as_u64().unwrap();
    assert!(
        reserved > 0 && reserved.abs_diff(used) <= 4,
        "{reserved} vs {used}"
    );

    // A model none of whose replicas serves the API: a clear 400, not the engine's 404.
    let r = embed(&gw.addr, KEY, &wp_model, json!("x"));
    assert_eq!(r.status, 400, "{}", r.text());
    assert_eq!(error_code(&r), "api_not_served");
    assert!(
        r.text().contains("does not serve embeddings"),
        "{}",
        r.text()
    );
    let r = post(
        &gw.addr,
        KEY,
        "/tokenize",
        &json!({"model": ALIAS, "prompt": "x"}),
    );
    assert_eq!(r.status, 400, "{}", r.text());
    assert!(r.text().contains("does not serve tokenize"), "{}", r.text());
    // A replica that answers the path with 404/501 (llama-server without --embeddings):
    // the same clear 400, naming what the engine said, not the engine's own error.
    let r = embed(&gw.addr, KEY, "plain", json!("x"));
    assert_eq!(r.status, 400, "{}", r.text());
    assert_eq!(error_code(&r), "api_not_served");
    assert!(r.text().contains("answered 501"), "{}", r.text());
    let r = embed(&gw.addr, KEY, "no-such-model", json!("x"));
    assert_eq!(r.status, 404, "{}", r.text());
    assert_eq!(error_code(&r), "model_not_found");

    // Tenant limits: a request rate of one a minute admits one, then 429.
    let r = embed(&gw.addr, RPM_KEY, ALIAS, json!("first"));
    assert_eq!(r.status, 200, "{}", r.text());
    let r = embed(&gw.addr, RPM_KEY, ALIAS, json!("second"));
    assert_eq!(r.status, 429, "{}", r.text());
    assert_eq!(error_code(&r), "rate_limit_requests");
    // Input tokens count against the tokens per minute: 50 a minute fit one input of
    // about 30 tokens, not a second one at once.
    let words = "alpha beta gamma delta epsilon zeta theta iota kappa lambda mu nu xi \
                 omicron pi rho sigma tau upsilon phi chi psi omega";
    let r = embed(&gw.addr, TPM_KEY, ALIAS, json!(words));
    assert_eq!(r.status, 200, "{}", r.text());
    let n = r.json().unwrap()["usage"]["prompt_tokens"]
        .as_u64()
        .unwrap();
    assert!(
        (26..50).contains(&n),
        "the input is {n} tokens, not about 30"
    );
    let r = embed(&gw.addr, TPM_KEY, ALIAS, json!(words));
    assert_eq!(r.status, 429, "{}", r.text());
    assert_eq!(error_code(&r), "rate_limit_tokens");

    // By load: server a hangs (SIGSTOP) and holds the first embedding the gateway sends
    // it; from then on, a is the busier replica and every embedding goes to b.
    a.pause();
    let mut held: Option<JoinHandle<HttpResponse>> = None;
    for _ in 0..24 {
        let addr = gw.addr.clone();
        let h = std::thread::spawn(move || embed(&addr, KEY, ALIAS, json!("held or not")));
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            if in_flight(&gw, &la) >= 1 {
                held = Some(h);
                break;
            }
            if h.is_finished() {
                let r = h.join().unwrap();
                assert_eq!(r.status, 200, "{}", r.text());
                assert_eq!(r.header("x-warmpath-replica"), Some(lb.as_str()));
                break;
            }
            assert!(Instant::now() < deadline, "no answer in 60 s: {}", gw.log());
            std::thread::sleep(Duration::from_millis(10));
        }
        if held.is_some() {
            break;
        }
    }
    let held = held.expect("24 embeddings on idle replicas never went to a: ties are not shared");
    for i in 0..5 {
        let r = embed(&gw.addr, KEY, ALIAS, json!(format!("while a is busy {i}")));
        assert_eq!(r.status, 200, "{}", r.text());
        // The decision, not only the answer: a retry after a timeout on a would also
        // end on b.
        let d = decision(&gw, r.header("x-request-id").unwrap());
        assert_eq!(
            format!("r{}", d["decision"]["replica"]),
            lb,
            "a holds a request: b is less loaded: {d}"
        );
        assert_eq!(r.header("x-warmpath-replica"), Some(lb.as_str()));
    }
    a.resume();
    let r = held.join().unwrap();
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(r.header("x-warmpath-replica"), Some(la.as_str()));
    drop(b);
}

#[test]
fn tokenize_and_detokenize_pass_through_to_warmpath_replica() {
    let model = smollm2_model();
    let wp = ReplicaProc::spawn(&model).expect("replica");
    let name = model_of(&wp.addr);
    let yaml = format!(
        "{}{}",
        auth_yaml(&[("t", KEY, "")]),
        replicas_yaml(&[wp.url()])
    );
    let gw = GatewayProc::spawn(&yaml, &[], 1).expect("gateway");
    let text = "Warmpath routes prompts by their KV prefix. Ünïcödé, tabs\tand emoji 🚀 too.";

    // text -> tokens -> the same text, under both spellings of each path.
    let mut counts = Vec::new();
    for (tok_path, detok_path) in [
        ("/tokenize", "/detokenize"),
        ("/v1/tokenize", "/v1/detokenize"),
    ] {
        let r = post(
            &gw.addr,
            KEY,
            tok_path,
            &json!({"model": name, "prompt": text}),
        );
        assert_eq!(r.status, 200, "{tok_path}: {}\n{}", r.text(), gw.log());
        let v = r.json().unwrap();
        let tokens = v["tokens"].as_array().unwrap().clone();
        assert!(!tokens.is_empty(), "{v}");
        assert_eq!(v["count"], tokens.len(), "{v}");
        assert!(v["max_model_len"].as_u64().unwrap() > 0, "{v}");
        let d = decision(&gw, r.header("x-request-id").unwrap());
        assert_eq!(d["endpoint"], "tokenize", "{d}");
        assert_eq!(d["decision"]["explanation"]["policy"], "passthrough", "{d}");
        let r = post(
            &gw.addr,
            KEY,
            detok_path,
            &json!({"model": name, "tokens": tokens}),
        );
        assert_eq!(r.status, 200, "{detok_path}: {}", r.text());
        assert_eq!(r.json().unwrap()["prompt"], text, "round trip");
        counts.push(tokens.len() as u64);
    }
    assert_eq!(counts[0], counts[1]);

    // The count is the prompt length the gateway's own tokenizer gives the same prompt
    // (the decision log's prompt_tokens) and the replica reports for a completion.
    let r = post(
        &gw.addr,
        KEY,
        "/v1/completions",
        &json!({"model": name, "prompt": text, "max_tokens": 1}),
    );
    assert_eq!(r.status, 200, "{}", r.text());
    let d = decision(&gw, r.header("x-request-id").unwrap());
    assert_eq!(d["prompt_tokens"].as_u64(), Some(counts[0]), "{d}");
    assert_eq!(
        r.json().unwrap()["usage"]["prompt_tokens"].as_u64(),
        Some(counts[0])
    );
    // A chat, rendered with the template, likewise.
    let messages = json!([
        {"role": "system", "content": "You are terse."},
        {"role": "user", "content": text}
    ]);
    let r = post(
        &gw.addr,
        KEY,
        "/tokenize",
        &json!({"model": name, "messages": messages}),
    );
    assert_eq!(r.status, 200, "{}", r.text());
    let chat_count = r.json().unwrap()["count"].as_u64().unwrap();
    assert!(chat_count > counts[0], "the template adds tokens");
    let r = post(
        &gw.addr,
        KEY,
        "/v1/chat/completions",
        &json!({"model": name, "messages": messages, "max_tokens": 1}),
    );
    assert_eq!(r.status, 200, "{}", r.text());
    let d = decision(&gw, r.header("x-request-id").unwrap());
    assert_eq!(d["prompt_tokens"].as_u64(), Some(chat_count), "{d}");

    // The replica's own refusals pass through as they are.
    let r = post(
        &gw.addr,
        KEY,
        "/detokenize",
        &json!({"model": name, "tokens": [u32::MAX]}),
    );
    assert_eq!(r.status, 400, "{}", r.text());
    assert!(r.text().contains("outside the vocabulary"), "{}", r.text());
    // Without a key, nothing passes.
    let r = post_json(
        &gw.addr,
        "/tokenize",
        &[],
        &json!({"model": name, "prompt": text}),
    )
    .unwrap();
    assert_eq!(r.status, 401, "{}", r.text());
}

#![allow(clippy::unwrap_used)]
//! HTTP API tests on `dummy:tiny`: response shapes, bad input, control endpoints,
//! cancellation on disconnect, concurrency and preemption.

mod serve_support;

use serde_json::{json, Value};
use serve_support::*;
use std::net::SocketAddr;
use std::time::Duration;

const MODEL: &str = "dummy:tiny";

async fn model_name(addr: SocketAddr) -> String {
    get(addr, "/v1/models").await.json()["data"][0]["id"]
        .as_str()
        .unwrap()
        .to_string()
}

fn chat(model: &str, content: &str, max_tokens: u32) -> Value {
    json!({"model": model, "messages": [{"role": "user", "content": content}],
           "max_tokens": max_tokens, "temperature": 0})
}

async fn assert_good_request(addr: SocketAddr, model: &str) {
    let r = post_json(addr, "/v1/chat/completions", &chat(model, "hello", 4)).await;
    assert_eq!(r.status, 200, "{}", r.text());
    let v = r.json();
    assert_eq!(v["object"], "chat.completion");
    assert_eq!(v["usage"]["completion_tokens"].as_u64().unwrap(), 4);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_inputs_get_openai_errors_and_the_server_keeps_serving() {
    let srv = server(MODEL, |_| {}).await;
    let addr = srv.addr();
    let model = model_name(addr).await;
    let too_long: Vec<u32> = vec![65; 5000];
    let long_chat = "word ".repeat(1200);
    let cases: Vec<(&str, String, u16, &str, &str)> = vec![
        ("/v1/chat/completions", r#"{"model": "#.to_string(), 400, "invalid_json", "invalid JSON"),
        ("/v1/chat/completions", chat("no-such-model", "hi", 4).to_string(), 404, "model_not_found", "no-such-model"),
        ("/v1/chat/completions", json!({"model": model}).to_string(), 400, "invalid_request", "messages"),
        ("/v1/chat/completions", json!({"model": model, "messages": []}).to_string(), 400, "invalid_value", "messages"),
        (
            "/v1/chat/completions",
            json!({"model": model, "messages": [{"role": "user", "content": "hi"}], "max_tokens": "ten"}).to_string(),
            400,
            "invalid_request",
            "max_tokens",
        ),
        ("/v1/chat/completions", json!({"model": model, "messages": "hi"}).to_string(), 400, "invalid_request", "invalid type"),
        ("/v1/chat/completions", chat(&model, "hi", 100_000).to_string(), 400, "invalid_value", "context window"),
        (
            "/v1/chat/completions",
            json!({"model": model, "messages": [{"role": "user", "content": "hi"}], "temperature": 7}).to_string(),
            400,
            "invalid_value",
            "temperature",
        ),
        ("/v1/completions", json!({"model": model, "prompt": too_long}).to_string(), 413, "context_length_exceeded", "maximum context length"),
        ("/v1/completions", json!({"model": model, "prompt": [1, 2, 999999]}).to_string(), 400, "invalid_value", "vocabulary"),
        ("/v1/completions", json!({"model": model, "prompt": 12}).to_string(), 400, "invalid_request", "prompt"),
        ("/v1/completions", json!({"model": "gpt-4", "prompt": "hi"}).to_string(), 404, "model_not_found", "gpt-4"),
        ("/v1/completions", json!({"prompt": "hi"}).to_string(), 400, "invalid_request", "model"),
        ("/v1/completions", json!({"model": model, "prompt": "hi", "max_tokens": -3}).to_string(), 400, "invalid_request", "max_tokens"),
        ("/v1/completions", json!({"model": model, "prompt": "hi", "max_tokens": 0}).to_string(), 400, "invalid_value", "max_tokens"),
        ("/v1/completions", json!({"model": model, "prompt": "hi", "stream": "yes"}).to_string(), 400, "invalid_request", "stream"),
        ("/v1/completions", json!({"model": model, "prompt": ""}).to_string(), 400, "invalid_value", "empty"),
        ("/v1/chat/completions", chat(&model, &long_chat, 4).to_string(), 413, "context_length_exceeded", "maximum context length"),
        ("/v1/chat/completions", json!({"model": model, "messages": [{"role": "user", "content": 5}]}).to_string(), 400, "invalid_request", "messages"),
        ("/v1/chat/completions", json!({"model": model, "messages": [{"content": "hi"}]}).to_string(), 400, "invalid_request", "role"),
        ("/v1/chat/completions", "[1, 2]".to_string(), 400, "invalid_request", "invalid type"),
        ("/v1/chat/completions", format!("{} trailing", chat(&model, "hi", 4)), 400, "invalid_json", "trailing"),
    ];
    for (path, body, status, code, needle) in cases {
        let r = send(addr, "POST", path, &[], body.as_bytes()).await;
        assert_eq!(r.status, status, "{body} -> {}", r.text());
        let v = r.json();
        let err = &v["error"];
        assert_eq!(err["code"], code, "{body} -> {v}");
        assert!(err["type"].is_string() && err.get("param").is_some(), "{v}");
        let msg = err["message"].as_str().unwrap();
        assert!(
            msg.contains(needle),
            "{body}: message {msg:?} should mention {needle:?}"
        );
        assert_good_request(addr, &model).await;
    }
    let r = get(addr, "/no/such/path").await;
    assert_eq!(r.status, 404);
    assert_eq!(r.json()["error"]["code"], "not_found");
    srv.shutdown(Duration::from_secs(5)).await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn responses_have_openai_shapes_streaming_and_not() {
    let srv = server(MODEL, |_| {}).await;
    let addr = srv.addr();
    let model = model_name(addr).await;

    let full = post_json(addr, "/v1/chat/completions", &chat(&model, "shape test", 6))
        .await
        .json();
    assert_eq!(full["choices"][0]["message"]["role"], "assistant");
    assert_eq!(full["choices"][0]["finish_reason"], "length");
    let u = &full["usage"];
    assert_eq!(u["total_tokens"], u["prompt_tokens"].as_u64().unwrap() + 6);
    assert!(u["prompt_tokens_details"]["cached_tokens"].is_u64());

    let mut body = chat(&model, "shape test", 6);
    body["stream"] = json!(true);
    body["stream_options"] = json!({"include_usage": true});
    let r = post_json(addr, "/v1/chat/completions", &body).await;
    assert_eq!(r.status, 200);
    assert!(r
        .header("content-type")
        .unwrap()
        .starts_with("text/event-stream"));
    let data = r.sse_data();
    assert_eq!(data.last().unwrap(), "[DONE]");
    let chunks: Vec<Value> = data[..data.len() - 1]
        .iter()
        .map(|d| serde_json::from_str(d).unwrap())
        .collect();
    assert_eq!(chunks[0]["choices"][0]["delta"]["role"], "assistant");
    assert!(chunks
        .iter()
        .all(|c| c["object"] == "chat.completion.chunk"));
    let usage_chunk = chunks.last().unwrap();
    assert_eq!(usage_chunk["choices"].as_array().unwrap().len(), 0);
    assert_eq!(usage_chunk["usage"]["completion_tokens"], 6);
    let finish = &chunks[chunks.len() - 2];
    assert_eq!(finish["choices"][0]["finish_reason"], "length");
    let streamed: String = chunks
        .iter()
        .filter_map(|c| c["choices"][0]["delta"]["content"].as_str())
        .collect();
    assert_eq!(
        streamed,
        full["choices"][0]["message"]["content"].as_str().unwrap()
    );

    let comp =
        json!({"model": model, "prompt": "abc", "max_tokens": 5, "temperature": 0, "stream": true});
    let r = post_json(addr, "/v1/completions", &comp).await;
    let data = r.sse_data();
    assert_eq!(data.last().unwrap(), "[DONE]");
    let first: Value = serde_json::from_str(&data[0]).unwrap();
    assert_eq!(first["object"], "text_completion");
    assert!(
        data.iter().all(|d| !d.contains("\"usage\"")),
        "no usage unless asked"
    );
    let full = post_json(
        addr,
        "/v1/completions",
        &json!({"model": model, "prompt": "abc", "max_tokens": 5, "temperature": 0}),
    )
    .await
    .json();
    assert_eq!(full["object"], "text_completion");
    assert_eq!(full["usage"]["completion_tokens"], 5);
    srv.shutdown(Duration::from_secs(5)).await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn control_endpoints_report_model_state() {
    let srv = server(MODEL, |a| a.region = Some("eu-test".into())).await;
    let addr = srv.addr();
    let h = get(addr, "/health").await;
    assert_eq!(h.status, 200);
    assert_eq!(h.json()["status"], "ok");
    let info = get(addr, "/v1/replica/info").await.json();
    assert_eq!(info["block_size"], 16);
    assert_eq!(info["hash_scheme"], warmpath_core::SCHEME_VERSION);
    assert_eq!(info["region"], "eu-test");
    assert_eq!(info["device"], "cpu");
    assert_eq!(info["max_context"], 4096);
    let pages = info["capacity_blocks"].as_u64().unwrap();
    // dummy:tiny: 2 layers x (K,V) x 16 positions x 32 values x 2 bytes (f16) = 4 KiB a page.
    assert_eq!(pages, (256 << 20) / 4096);
    let load = get(addr, "/v1/replica/load").await.json();
    assert_eq!(load["kv_total_blocks"].as_u64().unwrap(), pages);
    assert_eq!(load["running"], 0);

    // The tokenizer endpoint rebuilds a tokenizer that agrees with the server.
    let spec: warmpath_text::TokenizerSpec =
        serde_json::from_slice(&get(addr, "/v1/replica/tokenizer").await.body).unwrap();
    let tok = warmpath_text::ChatTokenizer::from_spec(&spec).unwrap();
    let model = model_name(addr).await;
    let prompt = "count the tokens";
    let ids = tok.encode(prompt, true).unwrap();
    let r = post_json(
        addr,
        "/v1/completions",
        &json!({"model": model, "prompt": prompt, "max_tokens": 1}),
    )
    .await
    .json();
    assert_eq!(
        r["usage"]["prompt_tokens"].as_u64().unwrap() as usize,
        ids.len()
    );

    let m = get(addr, "/metrics").await.text();
    for name in [
        "warmpath_replica_running",
        "warmpath_replica_waiting",
        "warmpath_replica_kv_pages_used",
        "warmpath_replica_kv_pages_total",
        "warmpath_replica_prompt_tokens_cached_total",
        "warmpath_replica_prompt_tokens_computed_total",
        "warmpath_replica_prefill_tokens_per_second",
        "warmpath_replica_decode_tokens_per_second",
        "warmpath_replica_time_to_first_token_seconds_bucket",
        "warmpath_replica_inter_token_seconds_bucket",
        "warmpath_replica_preemptions_total",
    ] {
        assert!(m.contains(name), "metric {name} missing");
    }
    assert!(m.contains(&format!("warmpath_replica_kv_pages_total {pages}")));
    srv.shutdown(Duration::from_secs(5)).await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn identical_prompts_hit_the_cache_but_other_tenants_do_not() {
    let srv = server(MODEL, |_| {}).await;
    let addr = srv.addr();
    let model = model_name(addr).await;
    let prompt: Vec<u32> = (0..200).map(|i| 40 + (i * 7 % 200)).collect();
    let body = json!({"model": model, "prompt": prompt, "max_tokens": 8, "temperature": 0});
    let a = post_json_salted(addr, "/v1/completions", "tenant-a", &body)
        .await
        .json();
    let b = post_json_salted(addr, "/v1/completions", "tenant-a", &body)
        .await
        .json();
    let c = post_json_salted(addr, "/v1/completions", "tenant-b", &body)
        .await
        .json();
    let cached = |v: &Value| {
        v["usage"]["prompt_tokens_details"]["cached_tokens"]
            .as_u64()
            .unwrap()
    };
    assert_eq!(cached(&a), 0);
    assert_eq!(
        cached(&b),
        192,
        "all 12 full blocks of 200 tokens (199 reusable)"
    );
    assert_eq!(cached(&c), 0, "another tenant never hits");
    assert_eq!(a["choices"][0]["text"], b["choices"][0]["text"]);
    assert_eq!(a["choices"][0]["text"], c["choices"][0]["text"]);
    srv.shutdown(Duration::from_secs(5)).await.unwrap();
}

fn metric(text: &str, name: &str) -> f64 {
    text.lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(' '))
        .unwrap_or_else(|| panic!("metric {name} missing"))
        .parse()
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn closing_the_connection_mid_stream_frees_the_pages() {
    // SmolLM2's shape with random weights: steps long enough (tens of ms) to count them,
    // and no model file needed.
    let srv = server("dummy:smollm2-135m", |_| {}).await;
    let addr = srv.addr();
    let model = model_name(addr).await;
    let before = get(addr, "/v1/replica/load").await.json();
    let body = json!({"model": model, "prompt": "a long answer please", "max_tokens": 2000,
                      "temperature": 0, "stream": true, "ignore_eos": true});
    let mut client = open(
        addr,
        "POST",
        "/v1/completions",
        &[],
        body.to_string().as_bytes(),
    )
    .await;
    assert!(
        client.read_until("\"text\"", Duration::from_secs(60)).await,
        "stream started"
    );
    let load = get(addr, "/v1/replica/load").await.json();
    assert_eq!(load["running"], 1);
    assert!(load["kv_used_blocks"].as_u64().unwrap() > before["kv_used_blocks"].as_u64().unwrap());
    drop(client);
    let dropped_at = get(addr, "/v1/replica/load").await.json()["steps"]
        .as_u64()
        .unwrap();
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    let freed_at = loop {
        let l = get(addr, "/v1/replica/load").await.json();
        if l["running"] == 0 && l["waiting"] == 0 {
            break l["steps"].as_u64().unwrap();
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the request kept running after its client left"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    };
    // The server notices the closed socket when it writes the next token (one step), and
    // the engine loop drops the sequence at the start of the step after that.
    let steps = freed_at - dropped_at;
    assert!(steps <= 2, "pages freed {steps} steps after the disconnect");
    let m = get(addr, "/metrics").await.text();
    assert_eq!(metric(&m, "warmpath_replica_kv_blocks_locked"), 0.0);
    assert_eq!(metric(&m, "warmpath_replica_requests_cancelled_total"), 1.0);
    assert_eq!(metric(&m, "warmpath_replica_requests_finished_total"), 0.0);
    // Only cached full blocks remain in use (the private tail page went back to the pool).
    let used = get(addr, "/v1/replica/load").await.json()["kv_used_blocks"]
        .as_u64()
        .unwrap();
    let mut events = open(addr, "GET", "/v1/kv/events", &[], b"").await;
    assert!(events.read_until("hashes", Duration::from_secs(10)).await);
    assert!(events.read_until("]}\n", Duration::from_secs(10)).await);
    let body = String::from_utf8_lossy(&events.body()).into_owned();
    let snap: Value = serde_json::from_str(body.lines().next().unwrap()).unwrap();
    assert_eq!(snap["type"], "snapshot");
    let cached = snap["hashes"].as_array().unwrap().len() as u64;
    assert!(cached > 0);
    assert_eq!(used, cached, "pages in use besides the cached blocks");
    let generated = metric(&m, "warmpath_replica_generation_tokens_total");
    assert!(generated < 2000.0, "it ran to the end: {generated} tokens");
    srv.shutdown(Duration::from_secs(5)).await.unwrap();
}

async fn complete_text(
    addr: SocketAddr,
    model: &str,
    prompt: &str,
    max_tokens: u32,
    stream: bool,
) -> String {
    let body = json!({"model": model, "prompt": prompt, "max_tokens": max_tokens, "temperature": 0, "stream": stream});
    let r = post_json(addr, "/v1/completions", &body).await;
    assert_eq!(r.status, 200, "{}", r.text());
    if !stream {
        return r.json()["choices"][0]["text"].as_str().unwrap().to_string();
    }
    let data = r.sse_data();
    assert_eq!(data.last().map(String::as_str), Some("[DONE]"));
    data[..data.len() - 1]
        .iter()
        .map(|d| {
            serde_json::from_str::<Value>(d).unwrap()["choices"][0]["text"]
                .as_str()
                .unwrap_or("")
                .to_string()
        })
        .collect()
}

async fn concurrent_equals_sequential(addr: SocketAddr, n: usize, max_tokens: u32) {
    let model = model_name(addr).await;
    let prompts: Vec<String> = (0..n)
        .map(|i| format!("request number {i}: {}", "xyz ".repeat(i + 3)))
        .collect();
    let mut sequential = Vec::new();
    for p in &prompts {
        sequential.push(complete_text(addr, &model, p, max_tokens, true).await);
    }
    let tasks: Vec<_> = prompts
        .iter()
        .map(|p| {
            let (m, p) = (model.clone(), p.clone());
            tokio::spawn(async move { complete_text(addr, &m, &p, max_tokens, true).await })
        })
        .collect();
    for (i, t) in tasks.into_iter().enumerate() {
        assert_eq!(
            t.await.unwrap(),
            sequential[i],
            "request {i} differs when batched"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sixteen_concurrent_streams_match_one_by_one() {
    let srv = server(MODEL, |_| {}).await;
    concurrent_equals_sequential(srv.addr(), 16, 24).await;
    srv.shutdown(Duration::from_secs(5)).await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pool_too_small_for_the_load_preempts_and_still_answers_correctly() {
    // 24 pages of 4 KiB (f16): 8 concurrent requests of ~8 pages each cannot all fit.
    let srv = server(MODEL, |a| {
        a.kv_memory = replica::server::ByteSize(24 * 4096)
    })
    .await;
    concurrent_equals_sequential(srv.addr(), 8, 80).await;
    let m = get(srv.addr(), "/metrics").await.text();
    let pre: u64 = m
        .lines()
        .find_map(|l| l.strip_prefix("warmpath_replica_preemptions_total "))
        .unwrap()
        .parse()
        .unwrap();
    assert!(pre > 0, "expected preemptions with a 24-page pool");
    srv.shutdown(Duration::from_secs(5)).await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stop_strings_end_the_answer() {
    let srv = server(MODEL, |_| {}).await;
    let addr = srv.addr();
    let model = model_name(addr).await;
    let text = complete_text(addr, &model, "stop test", 40, false).await;
    let chars: Vec<char> = text.chars().collect();
    assert!(chars.len() > 6, "need some text: {text:?}");
    let stop: String = chars[3..5].iter().collect();
    let body = json!({"model": model, "prompt": "stop test", "max_tokens": 40, "temperature": 0, "stop": [stop]});
    let v = post_json(addr, "/v1/completions", &body).await.json();
    let got = v["choices"][0]["text"].as_str().unwrap();
    let want = &text[..text.find(&stop).unwrap()];
    assert_eq!(got, want);
    assert_eq!(v["choices"][0]["finish_reason"], "stop");
    srv.shutdown(Duration::from_secs(5)).await.unwrap();
}

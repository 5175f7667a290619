#![allow(clippy::unwrap_used)]
//! Tests on the real default model (SmolLM2-135M-Instruct): prefix-cache hits give the
//! same greedy tokens, tenants are isolated, and batching does not change outputs.

mod serve_support;

use serde_json::{json, Value};
use serve_support::*;
use std::net::SocketAddr;
use std::time::Duration;
use warmpath_text::{ChatTokenizer, TokenizerSpec};

async fn tokenizer(addr: SocketAddr) -> ChatTokenizer {
    let spec: TokenizerSpec =
        serde_json::from_slice(&get(addr, "/v1/replica/tokenizer").await.body).unwrap();
    ChatTokenizer::from_spec(&spec).unwrap()
}

/// `n` token ids of real English text.
fn text_tokens(tok: &ChatTokenizer, n: usize, seed: usize) -> Vec<u32> {
    let words = [
        "the",
        "cache",
        "serves",
        "prefix",
        "tokens",
        "while",
        "a",
        "replica",
        "answers",
        "many",
        "requests",
        "from",
        "tenants",
        "with",
        "shared",
        "system",
        "prompts",
        "and",
        "long",
        "documents",
    ];
    let mut text = String::new();
    let mut i = seed;
    while text.len() < n * 8 {
        text.push_str(words[i % words.len()]);
        text.push(' ');
        i = (i * 7 + 3) % 1009;
    }
    let ids = tok.encode(&text, true).unwrap();
    assert!(ids.len() >= n);
    ids[..n].iter().map(|t| t.0).collect()
}

async fn complete(addr: SocketAddr, model: &str, prompt: &[u32], salt: &str) -> Value {
    let body = json!({"model": model, "prompt": prompt, "max_tokens": 12, "temperature": 0});
    let r = post_json_salted(addr, "/v1/completions", salt, &body).await;
    assert_eq!(r.status, 200, "{}", r.text());
    r.json()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_repeated_1000_token_prompt_is_served_from_cache_with_identical_tokens() {
    let srv = server("", |_| {}).await;
    let addr = srv.addr();
    let model = get(addr, "/v1/models").await.json()["data"][0]["id"]
        .as_str()
        .unwrap()
        .to_string();
    let prompt = text_tokens(&tokenizer(addr).await, 1000, 1);
    let first = complete(addr, &model, &prompt, "tenant-a").await;
    let second = complete(addr, &model, &prompt, "tenant-a").await;
    let other = complete(addr, &model, &prompt, "tenant-b").await;
    let cached = |v: &Value| {
        v["usage"]["prompt_tokens_details"]["cached_tokens"]
            .as_u64()
            .unwrap()
    };
    assert_eq!(first["usage"]["prompt_tokens"], 1000);
    assert_eq!(cached(&first), 0);
    // 62 full blocks of 16 hold 992 tokens; the 1000th token is recomputed for logits.
    assert_eq!(cached(&second), 992);
    assert_eq!(cached(&other), 0, "a different cache salt never hits");
    let text = |v: &Value| v["choices"][0]["text"].as_str().unwrap().to_string();
    assert!(!text(&first).is_empty());
    assert_eq!(
        text(&first),
        text(&second),
        "cached and uncached greedy outputs differ"
    );
    assert_eq!(text(&first), text(&other));
    srv.shutdown(Duration::from_secs(5)).await.unwrap();
}

async fn stream_text(addr: SocketAddr, model: &str, prompt: &str) -> String {
    let body = json!({"model": model, "messages": [{"role": "user", "content": prompt}],
                      "max_tokens": 16, "temperature": 0, "stream": true});
    let r = post_json(addr, "/v1/chat/completions", &body).await;
    assert_eq!(r.status, 200);
    let data = r.sse_data();
    assert_eq!(data.last().map(String::as_str), Some("[DONE]"));
    data[..data.len() - 1]
        .iter()
        .filter_map(|d| {
            serde_json::from_str::<Value>(d).unwrap()["choices"][0]["delta"]["content"]
                .as_str()
                .map(str::to_string)
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sixteen_concurrent_streams_match_one_by_one() {
    let srv = server("", |_| {}).await;
    let addr = srv.addr();
    let model = get(addr, "/v1/models").await.json()["data"][0]["id"]
        .as_str()
        .unwrap()
        .to_string();
    let prompts: Vec<String> = (0..16)
        .map(|i| format!("Write one sentence about the number {i}."))
        .collect();
    let mut sequential = Vec::new();
    for p in &prompts {
        sequential.push(stream_text(addr, &model, p).await);
    }
    let tasks: Vec<_> = prompts
        .iter()
        .map(|p| {
            let (m, p) = (model.clone(), p.clone());
            tokio::spawn(async move { stream_text(addr, &m, &p).await })
        })
        .collect();
    for (i, t) in tasks.into_iter().enumerate() {
        let got = t.await.unwrap();
        assert!(!got.is_empty());
        assert_eq!(got, sequential[i], "request {i} differs when batched");
    }
    srv.shutdown(Duration::from_secs(5)).await.unwrap();
}

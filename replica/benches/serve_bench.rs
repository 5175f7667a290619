#![allow(clippy::unwrap_used)]
//! Serving benchmark on the default model (SmolLM2-135M, CPU), run once and recorded in
//! BENCHMARKS.md (`## replica serving`):
//!
//! * TTFT of a 2,048-token prompt, uncached vs with its first 1,920 tokens cached;
//! * aggregate decode tokens/s with 1 stream and with 16 concurrent streams.
//!
//! `cargo bench -p replica --bench serve_bench [--profile dev] -- [--threads N]`

#[path = "../tests/serve_support/mod.rs"]
mod serve_support;

use serde_json::{json, Value};
use serve_support::*;
use std::net::SocketAddr;
use std::time::{Duration, Instant};
use warmpath_text::{ChatTokenizer, TokenizerSpec};

async fn model_and_tokenizer(addr: SocketAddr) -> (String, ChatTokenizer) {
    let model = get(addr, "/v1/models").await.json()["data"][0]["id"]
        .as_str()
        .unwrap()
        .to_string();
    let spec: TokenizerSpec =
        serde_json::from_slice(&get(addr, "/v1/replica/tokenizer").await.body).unwrap();
    (model, ChatTokenizer::from_spec(&spec).unwrap())
}

fn text_tokens(tok: &ChatTokenizer, n: usize, seed: usize) -> Vec<u32> {
    let words = [
        "alpha", "river", "stone", "cloud", "garden", "metal", "quiet", "signal", "orange",
        "paper", "window", "seven", "forest", "engine", "silver", "market", "winter", "yellow",
        "bridge", "candle",
    ];
    let mut text = String::new();
    let mut i = seed;
    while text.len() < n * 8 {
        text.push_str(words[i % words.len()]);
        text.push(' ');
        i = i.wrapping_mul(31).wrapping_add(17) % 1_000_003;
    }
    tok.encode(&text, true).unwrap()[..n]
        .iter()
        .map(|t| t.0)
        .collect()
}

/// Sends a streaming completion; returns (time to first data line, total time, tokens).
async fn timed_stream(
    addr: SocketAddr,
    model: &str,
    prompt: &Value,
    max_tokens: u32,
) -> (Duration, Duration, u64) {
    // `ignore_eos`: every stream generates exactly `max_tokens`.
    let body = json!({"model": model, "prompt": prompt, "max_tokens": max_tokens, "temperature": 0,
                      "ignore_eos": true, "stream": true, "stream_options": {"include_usage": true}});
    let t0 = Instant::now();
    let mut conn = open(
        addr,
        "POST",
        "/v1/completions",
        &[],
        body.to_string().as_bytes(),
    )
    .await;
    assert!(conn.read_until("data: ", Duration::from_secs(600)).await);
    let ttft = t0.elapsed();
    assert!(
        conn.read_until("data: [DONE]", Duration::from_secs(600))
            .await
    );
    let total = t0.elapsed();
    let body = String::from_utf8_lossy(&conn.body()).into_owned();
    let usage: Value = body
        .lines()
        .filter_map(|l| l.strip_prefix("data: "))
        .filter_map(|d| serde_json::from_str::<Value>(d).ok())
        .find(|v| v.get("usage").is_some())
        .expect("usage chunk");
    (
        ttft,
        total,
        usage["usage"]["completion_tokens"].as_u64().unwrap(),
    )
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

async fn ttft_bench(addr: SocketAddr, model: &str, tok: &ChatTokenizer) -> (Duration, Duration) {
    let mut cold = Vec::new();
    let mut warm = Vec::new();
    for round in 0..3 {
        // Uncached: a fresh 2,048-token prompt.
        let fresh = text_tokens(tok, 2048, 1000 + round);
        cold.push(timed_stream(addr, model, &json!(fresh), 1).await.0);
        // Cached: warm a 1,920-token prefix, then send prefix + 128 new tokens.
        let prefix = text_tokens(tok, 1920, 2000 + round);
        timed_stream(addr, model, &json!(prefix), 1).await;
        let mut prompt = prefix.clone();
        prompt.extend(text_tokens(tok, 128, 3000 + round));
        let r = post_json(
            addr,
            "/v1/completions",
            &json!({"model": model, "prompt": prompt.clone(), "max_tokens": 1}),
        )
        .await;
        let cached = r.json()["usage"]["prompt_tokens_details"]["cached_tokens"]
            .as_u64()
            .unwrap();
        assert_eq!(cached, 1920, "the prefix must be cached");
        // Measure on a second suffix so the 2,048 tokens are not all cached.
        let mut prompt2 = prefix;
        prompt2.extend(text_tokens(tok, 128, 4000 + round));
        warm.push(timed_stream(addr, model, &json!(prompt2), 1).await.0);
    }
    (median(cold), median(warm))
}

async fn decode_bench(addr: SocketAddr, model: &str, streams: usize, max_tokens: u32) -> f64 {
    let t0 = Instant::now();
    let tasks: Vec<_> = (0..streams)
        .map(|i| {
            let m = model.to_string();
            let prompt = json!(format!("Story {i}: once upon a time"));
            tokio::spawn(async move { timed_stream(addr, &m, &prompt, max_tokens).await })
        })
        .collect();
    let mut tokens = 0;
    for t in tasks {
        tokens += t.await.unwrap().2;
    }
    tokens as f64 / t0.elapsed().as_secs_f64()
}

fn main() {
    let threads = std::env::args()
        .skip_while(|a| a != "--threads")
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async move {
        let srv = server("", |a| {
            a.threads = threads;
            a.kv_memory = replica::server::ByteSize(1 << 30);
        })
        .await;
        let addr = srv.addr();
        let (model, tok) = model_and_tokenizer(addr).await;
        println!("model {model}, threads {threads}");
        let (cold, warm) = ttft_bench(addr, &model, &tok).await;
        println!(
            "ttft_2048_uncached_ms {:.1}\nttft_2048_cached1920_ms {:.1}\nttft_ratio {:.3}",
            cold.as_secs_f64() * 1e3,
            warm.as_secs_f64() * 1e3,
            warm.as_secs_f64() / cold.as_secs_f64()
        );
        // Warm-up, then decode throughput.
        decode_bench(addr, &model, 1, 8).await;
        let single = decode_bench(addr, &model, 1, 128).await;
        let sixteen = decode_bench(addr, &model, 16, 128).await;
        println!(
            "decode_tok_s_1_stream {single:.1}\ndecode_tok_s_16_streams {sixteen:.1}\nscaling {:.2}x\nvs_llama_server_16 {:.2}x (88 tok/s)",
            sixteen / single,
            sixteen / 88.0
        );
        let m = get(addr, "/metrics").await.text();
        for l in m.lines().filter(|l| l.starts_with("warmpath_replica_prompt_tokens") || l.starts_with("warmpath_replica_preemptions")) {
            println!("{l}");
        }
        srv.shutdown(Duration::from_secs(5)).await.unwrap();
    });
}

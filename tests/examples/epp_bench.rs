//! The Endpoint Picker's decision latency (BENCHMARKS.md): `gateway epp` with 64 endpoints
//! (mock replicas on loopback that speak the replica's control endpoints with the
//! byte-level tokenizer), driven over real gRPC as Envoy drives it in FULL_DUPLEX_STREAMED
//! mode. The latency is from sending the last body chunk to receiving the answer that
//! names the endpoint (tokenize, hash, tenant limits, policy over the prefix index, slot,
//! decision log, and the gRPC round trip on loopback), for short prompts and 25 KB prompts
//! (16 conversations' shared 24 KB prefixes, each request a new question).
//!
//! `cargo build --release -p gateway --bins && cargo run --release -p warmpath-e2e --example
//! epp_bench [-- REQUESTS]`

use std::time::{Duration, Instant};
use warmpath_e2e::epp::{self, EppProc, ExtProc, FULL_DUPLEX_STREAMED};
use warmpath_e2e::mock::{MockReplica, Mode};

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i]
}

async fn decide(addr: &str, body: &[u8]) -> Duration {
    let mut s = ExtProc::open(addr).await.expect("stream");
    s.send(epp::request_headers(
        "/v1/chat/completions",
        None,
        FULL_DUPLEX_STREAMED,
        None,
        false,
    ))
    .await;
    let t0 = Instant::now();
    s.send(epp::request_body(body, true)).await;
    let a = s.recv(Duration::from_secs(30)).await.expect("answer");
    let took = t0.elapsed();
    assert!(epp::destination(&a).is_some(), "no destination: {a:?}");
    s.close();
    took
}

fn body(system: &str, question: &str) -> Vec<u8> {
    serde_json::to_vec(&serde_json::json!({
        "model": "mock",
        "messages": [{"role": "system", "content": system}, {"role": "user", "content": question}],
        "max_tokens": 8
    }))
    .expect("json")
}

fn main() {
    let n: usize = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(400);
    let mocks: Vec<MockReplica> = (0..64).map(|_| MockReplica::start(Mode::Ok)).collect();
    let mut yaml = String::from("auth: {enabled: false}\ndecision_log: 64\nreplicas:\n");
    for m in &mocks {
        yaml.push_str(&format!("  - {}\n", m.url()));
    }
    let p = EppProc::spawn(&yaml, 64).expect("epp");
    let rt = epp::runtime();
    let prefixes: Vec<String> = (0..16)
        .map(|c| {
            let mut s = format!("conversation {c}: ");
            while s.len() < 24_000 {
                s.push_str("The quick brown fox jumps over the lazy dog near the river bank. ");
            }
            s
        })
        .collect();
    for (label, make) in [
        (
            "short",
            Box::new(|i: usize| body("You are helpful.", &format!("What is {i} + {i}?")))
                as Box<dyn Fn(usize) -> Vec<u8>>,
        ),
        (
            "25KB",
            Box::new(|i: usize| {
                body(
                    &prefixes[i % prefixes.len()],
                    &format!("Question {i}: {}", "why ".repeat(200)),
                )
            }),
        ),
    ] {
        let bodies: Vec<Vec<u8>> = (0..n).map(&make).collect();
        let mut took: Vec<Duration> = rt.block_on(async {
            // Warm-up: connections, tokenizer caches.
            for b in bodies.iter().take(20) {
                decide(&p.grpc, b).await;
            }
            let mut v = Vec::with_capacity(n);
            for b in &bodies {
                v.push(decide(&p.grpc, b).await);
            }
            v
        });
        took.sort();
        println!(
            "{label:>6}: {} requests of {} bytes, 64 endpoints: decision p50 {:.3} ms, p99 {:.3} ms",
            n,
            bodies[0].len(),
            percentile(&took, 0.50).as_secs_f64() * 1e3,
            percentile(&took, 0.99).as_secs_f64() * 1e3,
        );
    }
}

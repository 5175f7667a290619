#![allow(clippy::unwrap_used)]
//! Done-when (issue 40, items 2 and 3): the gateway in front of vLLM-style servers
//! (`warmpath_e2e::vllm_mock`: a prefix cache keyed as vLLM keys blocks, with `cache_salt`
//! and the adapter in the extra keys, KV events over ZeroMQ for exactly the blocks stored,
//! `cached_tokens` reported).
//!
//! - Two tenants on one pool with salts on (`cache_salt: per_tenant`, vLLM's default): the
//!   engine receives each tenant's salt; neither tenant is predicted
//!   (`x-warmpath-predicted-cached-tokens`) or reported (`cached_tokens`) a hit on the
//!   other's prefix, while each reuses its own, predicted exactly.
//! - LoRA: requests for adapter `sql` go to the server whose cache holds `sql`'s prefix, and
//!   never get predicted hits from base-model blocks.

use serde_json::{json, Value};
use std::time::{Duration, Instant};
use warmpath_e2e::fixtures::auth_yaml;
use warmpath_e2e::http::post_json;
use warmpath_e2e::vllm_mock::{prompt, MockVllm};
use warmpath_e2e::GatewayProc;
use warmpath_protocol::replica_api::{HEADER_PREDICTED_CACHED, HEADER_REPLICA};

const TENANTS: [(&str, &str, &str); 2] = [("alpha", "key-alpha", ""), ("beta", "key-beta", "")];
const WAIT: Duration = Duration::from_secs(20);

fn gateway(mocks: &[&MockVllm]) -> GatewayProc {
    let ups: Vec<String> = mocks
        .iter()
        .map(|m| {
            format!(
                "      - {{url: {}, kv_events: {{endpoint: \"{}\"}}}}",
                m.url(),
                m.events_endpoint
            )
        })
        .collect();
    let yaml = format!(
        "{}policy: {{type: warm}}\npools:\n  - name: v\n    engine: vllm\n    tokenizer: none\n    \
         metrics: false\n    models: [base, sql]\n    lora_adapters: [sql]\n    upstreams:\n{}\n",
        auth_yaml(&TENANTS),
        ups.join("\n")
    );
    GatewayProc::spawn(&yaml, &[], mocks.len()).expect("gateway")
}

struct Answer {
    predicted: u64,
    reported: u64,
    replica: String,
}

fn ask(gw: &GatewayProc, key: &str, model: &str, text: &str) -> Answer {
    let auth = format!("Bearer {key}");
    let body = json!({"model": model, "prompt": text, "max_tokens": 1});
    let r = post_json(
        &gw.addr,
        "/v1/completions",
        &[("Authorization", &auth)],
        &body,
    )
    .unwrap();
    assert_eq!(r.status, 200, "{}", r.text());
    let j: Value = r.json().unwrap();
    Answer {
        predicted: r.header(HEADER_PREDICTED_CACHED).unwrap().parse().unwrap(),
        reported: j["usage"]["prompt_tokens_details"]["cached_tokens"]
            .as_u64()
            .unwrap(),
        replica: r.header(HEADER_REPLICA).unwrap().to_string(),
    }
}

/// Blocks the gateway's index holds per replica URL.
fn indexed(gw: &GatewayProc) -> Vec<(String, u64)> {
    let j = gw.admin_get("/admin/replicas").unwrap().json().unwrap();
    j["replicas"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            (
                r["url"].as_str().unwrap().to_string(),
                r["indexed_blocks"].as_u64().unwrap(),
            )
        })
        .collect()
}

fn indexed_of(gw: &GatewayProc, m: &MockVllm) -> u64 {
    indexed(gw)
        .into_iter()
        .find(|(u, _)| *u == m.url())
        .map_or(0, |e| e.1)
}

/// Waits until the index holds every block `m` stored but the `lost` ones published before
/// the gateway subscribed (its events are applied).
fn settle(gw: &GatewayProc, m: &MockVllm, lost: u64) {
    let deadline = Instant::now() + WAIT;
    while indexed_of(gw, m) + lost < m.blocks() as u64 {
        assert!(
            Instant::now() < deadline,
            "the index has {} of {}'s {} blocks; {:?}",
            indexed_of(gw, m),
            m.url(),
            m.blocks(),
            indexed(gw)
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Until the subscriber is live (a ZeroMQ subscriber misses what is published before it
/// connects), stores throwaway prefixes on `m` until one is indexed; returns the blocks it
/// stored that the gateway never heard of.
fn sync(gw: &GatewayProc, m: &MockVllm) -> u64 {
    let deadline = Instant::now() + WAIT;
    for i in 0.. {
        let before = indexed_of(gw, m);
        let url = m.url();
        // A prefix only `m` can get: pinned by sending it until it lands there.
        let a = ask(
            gw,
            "key-alpha",
            "base",
            &prompt(&format!("sync-{url}-{i}"), 1),
        );
        let wait = Instant::now() + Duration::from_millis(500);
        while Instant::now() < wait {
            if indexed_of(gw, m) > before {
                return m.blocks() as u64 - indexed_of(gw, m);
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        assert!(
            Instant::now() < deadline,
            "never indexed; last went to {}",
            a.replica
        );
    }
    unreachable!()
}

#[test]
fn salted_tenants_never_see_each_others_prefix() {
    let m = MockVllm::start("base", &["sql"]);
    let gw = gateway(&[&m]);
    let lost = sync(&gw, &m);
    let p = prompt("shared-system-prompt", 8);

    let a1 = ask(&gw, "key-alpha", "base", &p);
    assert_eq!((a1.predicted, a1.reported), (0, 0));
    settle(&gw, &m, lost);
    // The same tenant again: predicted exactly what the engine reuses.
    let a2 = ask(&gw, "key-alpha", "base", &format!("{p}{}", prompt("a2", 2)));
    assert_eq!((a2.predicted, a2.reported), (128, 128));
    settle(&gw, &m, lost);
    // Another tenant, the same prefix, the same server: no hit predicted, none reported.
    let b1 = ask(&gw, "key-beta", "base", &format!("{p}{}", prompt("b1", 1)));
    assert_eq!((b1.predicted, b1.reported), (0, 0));
    settle(&gw, &m, lost);
    // And beta reuses its own.
    let b2 = ask(&gw, "key-beta", "base", &format!("{p}{}", prompt("b2", 1)));
    assert_eq!((b2.predicted, b2.reported), (128, 128));

    // The engine got each tenant's salt (two distinct), on every request.
    let served = m.served();
    let salts: Vec<&str> = served.iter().filter_map(|s| s.salt.as_deref()).collect();
    assert!(served
        .iter()
        .filter(|s| s.model == "base")
        .all(|s| s.salt.is_some()));
    let mut distinct = salts.clone();
    distinct.sort_unstable();
    distinct.dedup();
    assert_eq!(distinct.len(), 2, "{salts:?}");
}

#[test]
fn adapter_requests_go_where_the_adapter_is_warm() {
    let m0 = MockVllm::start("base", &["sql"]);
    let m1 = MockVllm::start("base", &["sql"]);
    let gw = gateway(&[&m0, &m1]);
    let lost0 = sync(&gw, &m0);
    let lost1 = sync(&gw, &m1);
    let p = prompt("sql-system-prompt", 8);

    // The adapter's prefix lands somewhere; the base model's prefix is the same text.
    let first = ask(&gw, "key-alpha", "sql", &p);
    assert_eq!((first.predicted, first.reported), (0, 0));
    let (warm, lost) = if m0.served().iter().any(|s| s.model == "sql") {
        (&m0, lost0)
    } else {
        (&m1, lost1)
    };
    settle(&gw, &m0, lost0);
    settle(&gw, &m1, lost1);
    // Base-model requests with the same text: never predicted a hit from the adapter's
    // blocks (nor reported one).
    let base = ask(
        &gw,
        "key-alpha",
        "base",
        &format!("{p}{}", prompt("base", 1)),
    );
    assert_eq!((base.predicted, base.reported), (0, 0));
    settle(&gw, &m0, lost0);
    settle(&gw, &m1, lost1);
    // Adapter requests go to the server holding the adapter's prefix, predicted exactly.
    for i in 0..3 {
        let before = warm.served().len();
        let a = ask(
            &gw,
            "key-alpha",
            "sql",
            &format!("{p}{}", prompt(&format!("q{i}"), 1)),
        );
        assert_eq!(
            warm.served().len(),
            before + 1,
            "request {i} went to {}",
            a.replica
        );
        assert_eq!((a.predicted, a.reported), (128, 128), "request {i}");
        settle(&gw, warm, lost);
    }
    // An adapter request whose prefix only the base model has cached: no predicted hit.
    let q = prompt("only-base", 4);
    let b = ask(&gw, "key-alpha", "base", &q);
    settle(&gw, &m0, lost0);
    settle(&gw, &m1, lost1);
    let s = ask(&gw, "key-alpha", "sql", &format!("{q}{}", prompt("x", 1)));
    assert_eq!(
        (s.predicted, s.reported),
        (0, 0),
        "base blocks on {}",
        b.replica
    );
}

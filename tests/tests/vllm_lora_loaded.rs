#![allow(clippy::unwrap_used)]
//! Done-when (issue 40, item 3, the loaded-adapter term): with nobody holding an adapter's
//! prefix, `warm` sends the request where the adapter is loaded, known two ways:
//!
//! - from the engine's `/metrics` (`vllm:lora_requests_info`, here from
//!   `warmpath_e2e::vllm_mock`): each server reports a different adapter running, and every
//!   cold prompt for an adapter goes to the server reporting it, not to its prefix's home;
//! - from where the gateway sent the adapter: with no metrics read, every cold prompt for
//!   an adapter follows the first one's server.
//!
//! The test charges a load 1 s (`adapter_load_ms`): back-to-back requests queue work on the
//! server that takes them in `warm`'s estimate (16 ms each at its default rate), which at
//! the default 50 ms would send every fourth prompt elsewhere, as it should for a real
//! server; here only the adapter term is under test.
//!
//! Without the term the same prompts alternate between the servers: each one queues
//! (estimated) work where it lands, so the next cold prompt's cheapest server is the other.

use serde_json::json;
use std::time::{Duration, Instant};
use warmpath_e2e::fixtures::auth_yaml;
use warmpath_e2e::http::post_json;
use warmpath_e2e::vllm_mock::{prompt, MockVllm};
use warmpath_e2e::GatewayProc;

const TENANTS: [(&str, &str, &str); 1] = [("alpha", "key-alpha", "")];
const PROMPTS: usize = 12;

fn gateway(mocks: &[&MockVllm], metrics: bool) -> GatewayProc {
    let ups: Vec<String> = mocks
        .iter()
        .map(|m| format!("      - {{url: {}}}", m.url()))
        .collect();
    let yaml = format!(
        "{}policy: {{type: warm, adapter_load_ms: 1000}}\nload_poll_ms: 50\npools:\n  - name: v\n    engine: vllm\n    \
         tokenizer: none\n    metrics: {metrics}\n    models: [base, sql, chat, tool]\n    \
         lora_adapters: [sql, chat, tool]\n    upstreams:\n{}\n",
        auth_yaml(&TENANTS),
        ups.join("\n")
    );
    GatewayProc::spawn(&yaml, &[], mocks.len()).expect("gateway")
}

/// Sends a cold completion for `model`; returns the index in `mocks` of the server that
/// answered it.
fn ask(gw: &GatewayProc, mocks: &[&MockVllm], model: &str, text: &str) -> usize {
    let before: Vec<usize> = mocks.iter().map(|m| m.served().len()).collect();
    let body = json!({"model": model, "prompt": text, "max_tokens": 1});
    let r = post_json(
        &gw.addr,
        "/v1/completions",
        &[("Authorization", "Bearer key-alpha")],
        &body,
    )
    .unwrap();
    assert_eq!(r.status, 200, "{}", r.text());
    let hit: Vec<usize> = (0..mocks.len())
        .filter(|&i| mocks[i].served().len() > before[i])
        .collect();
    assert_eq!(hit.len(), 1, "one server answered: {hit:?}");
    hit[0]
}

/// Waits until every mock has answered `n` more scrapes (the gateway has read the report
/// at least once after the change).
fn scraped(mocks: &[&MockVllm], n: usize) {
    let start: Vec<usize> = mocks.iter().map(|m| m.scrapes()).collect();
    let deadline = Instant::now() + Duration::from_secs(20);
    while mocks.iter().zip(&start).any(|(m, s)| m.scrapes() < s + n) {
        assert!(Instant::now() < deadline, "the gateway scrapes /metrics");
        std::thread::sleep(Duration::from_millis(10));
    }
}

#[test]
fn cold_adapter_prompts_go_where_the_engine_reports_the_adapter() {
    let (m0, m1) = (
        MockVllm::start("base", &["sql", "chat", "tool"]),
        MockVllm::start("base", &["sql", "chat", "tool"]),
    );
    m0.report_running(&["chat"]);
    m1.report_running(&["sql"]);
    let mocks = [&m0, &m1];
    let gw = gateway(&mocks, true);
    // Two scrapes: the first one read after the report was set has been applied.
    scraped(&mocks, 2);
    for i in 0..PROMPTS {
        let sql = ask(&gw, &mocks, "sql", &prompt(&format!("sql-{i}"), 4));
        let chat = ask(&gw, &mocks, "chat", &prompt(&format!("chat-{i}"), 4));
        assert_eq!((sql, chat), (1, 0), "prompt {i}");
    }
    // The report changes: a third adapter, never sent by this gateway, runs on m0.
    m0.report_running(&["tool"]);
    m1.report_running(&[]);
    scraped(&mocks, 2);
    for i in 0..PROMPTS {
        let tool = ask(&gw, &mocks, "tool", &prompt(&format!("tool-{i}"), 4));
        assert_eq!(tool, 0, "prompt {i}");
    }
}

#[test]
fn cold_adapter_prompts_follow_where_the_gateway_sent_the_adapter() {
    let (m0, m1) = (
        MockVllm::start("base", &["sql", "chat", "tool"]),
        MockVllm::start("base", &["sql", "chat", "tool"]),
    );
    let mocks = [&m0, &m1];
    let gw = gateway(&mocks, false);
    let first = ask(&gw, &mocks, "sql", &prompt("sql-first", 4));
    for i in 0..PROMPTS {
        let at = ask(&gw, &mocks, "sql", &prompt(&format!("sql-{i}"), 4));
        assert_eq!(at, first, "prompt {i}");
    }
}

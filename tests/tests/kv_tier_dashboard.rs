#![allow(clippy::unwrap_used)]
//! Issue 26, done-when: the gateway and its dashboard tell tier hits from local hits. Replica
//! A (tier on, behind a gateway of its own) answers a long prompt and writes its blocks to a
//! real `redis-server`; the gateway under test fronts replica B (tier on), which never saw
//! the prompt. The
//! first request through the gateway is a tier hit, the second a local hit; the gateway's
//! metric, its dashboard snapshot and the page in headless Chromium show the two apart.

use serde_json::{json, Value};
use std::time::{Duration, Instant};
use warmpath_e2e::browser::{log_in, Browser, Driver};
use warmpath_e2e::fixtures::{long_prompt, model_of, prompt_and_cached, smollm2_model};
use warmpath_e2e::http::{get, post_json, HttpResponse};
use warmpath_e2e::redis::RedisServer;
use warmpath_e2e::{GatewayProc, ReplicaProc};

const ADMIN_KEY: &str = "kv-tier-dashboard-admin-key-7";

fn complete(addr: &str, model: &str, prompt: &str) -> HttpResponse {
    let body = json!({"model": model, "prompt": prompt, "max_tokens": 4, "temperature": 0});
    let r = post_json(addr, "/v1/completions", &[], &body).unwrap();
    assert_eq!(r.status, 200, "{}", r.text());
    r
}

/// Waits until Redis holds `keys` keys and A's write queue is empty.
fn wait_written(a: &ReplicaProc, redis: &RedisServer, keys: u64) {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let n: u64 = redis.cli(&["DBSIZE"]).unwrap().trim().parse().unwrap();
        let metrics = get(&a.addr, "/metrics", &[]).unwrap().text();
        let empty = metrics
            .lines()
            .any(|l| l == "warmpath_replica_kv_tier_queue_bytes 0");
        if n >= keys && empty {
            return;
        }
        assert!(Instant::now() < deadline, "{n} of {keys} blocks in Redis");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// The gateway's dashboard snapshot once it has counted `requests` requests (it counts in
/// its logging phase, a moment after the client has the answer).
fn snapshot(g: &GatewayProc, requests: u64) -> Value {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let s: Value = g
            .admin_get("/dashboard/snapshot.json")
            .unwrap()
            .json()
            .unwrap();
        if s["totals"]["requests"].as_u64() >= Some(requests) {
            return s;
        }
        assert!(Instant::now() < deadline, "requests never counted: {s:#}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

const READ_TIER: &str = r##"
const t = (id) => document.getElementById(id).textContent.trim();
return {
  updates: (window.warmpathDashboard || {updates: 0}).updates,
  local: t("local-hit-rate"),
  tier: t("tier-hit-rate"),
  splits: [...document.querySelectorAll("#replicas td.split")].map((td) => td.textContent.trim()),
};"##;

#[test]
fn the_dashboard_shows_tier_hits_apart_from_local_hits() {
    let driver = Driver::start();
    let model_path = smollm2_model();
    let redis = RedisServer::start().unwrap();
    let url = redis.url();
    let tiered = ["--kv-store", url.as_str()];
    let a = ReplicaProc::spawn_args(&model_path, 0, &tiered).unwrap();
    let b = ReplicaProc::spawn_args(&model_path, 0, &tiered).unwrap();
    let model = model_of(&a.addr);
    let prompt = long_prompt(
        "Inventory of the harbour stores",
        1,
        &[
            "rope", "lantern", "anchor", "tar", "canvas", "barrel", "compass",
        ],
        "Name the first item of the inventory:",
    );

    // The gateway salts each tenant's blocks (its requests carry the tenant's cache salt),
    // so A answers through a gateway of its own with the same tenants: a fleet of two.
    let only = |r: &ReplicaProc| format!("auth: {{enabled: false}}\nreplicas:\n  - {}\n", r.url());
    let ga = GatewayProc::spawn(&only(&a), &[], 1).unwrap();
    let (prompt_tokens, _) = prompt_and_cached(&complete(&ga.addr, &model, &prompt));
    assert!(prompt_tokens >= 600, "{prompt_tokens}");
    wait_written(&a, &redis, prompt_tokens / 16);
    // A announced the blocks it wrote as shared-tier KV events: A's gateway holds them in its
    // index's shared set (which any replica's match can extend into).
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let index: Value = ga.admin_get("/admin/index").unwrap().json().unwrap();
        if index["shared_entries"].as_u64() >= Some(prompt_tokens / 16) {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "A's gateway never learned the shared blocks: {index}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }

    let g = GatewayProc::spawn_with_admin_key(&only(&b), &[], 1, ADMIN_KEY).unwrap();
    let first = complete(&g.addr, &model, &prompt);
    assert_eq!(first.header("x-warmpath-kv-tier"), Some("hit"));
    let (_, tier_tokens) = prompt_and_cached(&first);
    assert!(tier_tokens * 10 >= prompt_tokens * 8, "{tier_tokens}");
    let second = complete(&g.addr, &model, &prompt);
    assert_ne!(second.header("x-warmpath-kv-tier"), Some("hit"));
    let (_, local_tokens) = prompt_and_cached(&second);
    assert!(
        local_tokens >= tier_tokens,
        "{local_tokens} < {tier_tokens}"
    );

    // The snapshot: all cached tokens, and the tier's part of them.
    let s = snapshot(&g, 2);
    let t = &s["totals"];
    assert_eq!(
        t["actual_cached_tokens"].as_u64(),
        Some(tier_tokens + local_tokens)
    );
    assert_eq!(t["tier_cached_tokens"].as_u64(), Some(tier_tokens), "{t}");
    let prompt_total = (2 * prompt_tokens) as f64;
    let near = |v: &Value, want: f64| (v.as_f64().unwrap() - want).abs() < 1e-9;
    assert!(
        near(&t["tier_hit_rate"], tier_tokens as f64 / prompt_total),
        "{t}"
    );
    assert!(
        near(&t["local_hit_rate"], local_tokens as f64 / prompt_total),
        "{t}"
    );
    let row = &s["replicas"][0];
    assert!(
        near(&row["tier_hit_rate"], tier_tokens as f64 / prompt_total),
        "{row}"
    );
    assert!(
        near(&row["local_hit_rate"], local_tokens as f64 / prompt_total),
        "{row}"
    );
    let metrics = g.metrics().unwrap();
    let line =
        format!("warmpath_gateway_tier_cached_tokens_total{{model=\"{model}\"}} {tier_tokens}");
    assert!(
        metrics.lines().any(|l| l == line),
        "no `{line}` in the metrics"
    );

    // The page: the tile and the replica's row show both rates, as the snapshot has them.
    let pct = |x: f64| format!("{:.1}%", 100.0 * x);
    let (want_local, want_tier) = (
        pct(local_tokens as f64 / prompt_total),
        pct(tier_tokens as f64 / prompt_total),
    );
    let browser = Browser::open(&driver);
    browser.goto(&format!("http://{}/dashboard", g.admin));
    log_in(&browser, ADMIN_KEY);
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let page = browser.eval(READ_TIER);
        if page["tier"] == json!(want_tier)
            && page["local"] == json!(want_local)
            && page["splits"] == json!([format!("{want_local} / {want_tier}")])
        {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the page never showed {want_local} local / {want_tier} tier: {page:#}"
        );
        std::thread::sleep(Duration::from_millis(250));
    }
}

#![allow(clippy::unwrap_used)]
//! The routing dashboard in a real browser: headless Chromium, driven over the W3C WebDriver
//! protocol (chromedriver), logs in with the admin key, then loads `/dashboard` from a gateway in front of two real replicas
//! serving SmolLM2-135M-Instruct while traffic flows, and shows replicas, the cache hit rate,
//! tenants and routing decisions, updating live. Saves a screenshot to
//! `$CARGO_TARGET_DIR/dashboard.png` (`target/dashboard.png` by default).
//!
//! Needs Debian's `chromium` and `chromium-driver` (`scripts/ci-deps.sh` installs them) and
//! the model (`scripts/fetch-model.sh`).

use serde_json::Value;
use std::time::{Duration, Instant};
use warmpath_e2e::browser::{log_in, Browser, Driver};
use warmpath_e2e::fixtures::{auth_yaml, chat, model_of, replicas_yaml, smollm2_model};
use warmpath_e2e::http::post_json;
use warmpath_e2e::{GatewayProc, ReplicaProc};

/// What the page shows, read from its DOM.
const READ_PAGE: &str = r##"
const t = (id) => document.getElementById(id).textContent.trim();
return {
  updates: (window.warmpathDashboard || {updates: 0}).updates,
  status: t("status"),
  hit_rate: t("hit-rate"),
  requests: t("requests-total"),
  replicas: [...document.querySelectorAll("#replicas tbody tr[data-replica]")].map((r) => r.innerText),
  replica_hit_rates: [...document.querySelectorAll("#replicas td.hit")].map((td) => td.textContent.trim()),
  history_points: ((window.warmpathDashboard || {}).last || {history: []}).history.length,
  tenants: [...document.querySelectorAll("#tenants tbody tr[data-tenant]")].map((r) => r.innerText),
  decisions: [...document.querySelectorAll("#decisions tbody tr.decision")].map((r) => r.innerText),
  checkpoints: [...document.querySelectorAll("#checkpoints tbody tr[data-checkpoint]")].map((r) => r.innerText),
};"##;

fn wait_for(b: &Browser, what: &str, timeout: Duration, ok: impl Fn(&Value) -> bool) -> Value {
    let deadline = Instant::now() + timeout;
    loop {
        let page = b.eval(READ_PAGE);
        if ok(&page) {
            return page;
        }
        assert!(
            Instant::now() < deadline,
            "dashboard never showed {what}; page: {page:#}"
        );
        std::thread::sleep(Duration::from_millis(250));
    }
}

/// Sends questions `range` (all sharing `system`) as `key`; returns how many got 200.
fn traffic(gw: &str, model: &str, key: &str, system: &str, range: std::ops::Range<usize>) -> usize {
    let auth = format!("Bearer {key}");
    let mut ok = 0;
    for i in range {
        let body = chat(model, system, &format!("question {i}?"), 2, false);
        let r = post_json(
            gw,
            "/v1/chat/completions",
            &[("Authorization", &auth)],
            &body,
        )
        .unwrap();
        match r.status {
            200 => ok += 1,
            429 => {}
            s => panic!("unexpected status {s}: {}", r.text()),
        }
    }
    ok
}

const ADMIN_KEY: &str = "dashboard-e2e-admin-key-42";

#[test]
fn dashboard_shows_live_routing_in_a_browser() {
    // Fail early, and clearly, without a browser.
    let driver = Driver::start();
    let smollm2 = smollm2_model();
    let replicas = [
        ReplicaProc::spawn(&smollm2).unwrap(),
        ReplicaProc::spawn(&smollm2).unwrap(),
    ];
    let urls: Vec<String> = replicas.iter().map(ReplicaProc::url).collect();
    let yaml = format!(
        "{}{}",
        replicas_yaml(&urls),
        auth_yaml(&[
            (
                "acme",
                "sk-acme",
                "requests_per_minute: 6000, request_burst: 100"
            ),
            (
                "beta",
                "sk-beta",
                "requests_per_minute: 1, request_burst: 1"
            ),
        ])
    );
    let gw = GatewayProc::spawn_with_admin_key(&yaml, &[], 2, ADMIN_KEY).unwrap();
    let model = model_of(&replicas[0].addr);
    let system = "You are the dashboard test's assistant. Answer briefly and politely. ".repeat(6);
    assert_eq!(traffic(&gw.addr, &model, "sk-acme", &system, 0..4), 4);
    // beta: one admitted, the rest rejected by its limit.
    assert_eq!(traffic(&gw.addr, &model, "sk-beta", &system, 0..3), 1);

    let browser = Browser::open(&driver);
    browser.goto(&format!("http://{}/dashboard", gw.admin));
    log_in(&browser, ADMIN_KEY);
    let first = wait_for(
        &browser,
        "two replicas, a hit rate and decisions",
        Duration::from_secs(20),
        |p| {
            p["replicas"].as_array().is_some_and(|r| r.len() == 2)
                && p["hit_rate"]
                    .as_str()
                    .is_some_and(|h| h.ends_with('%') && h != "0.0%")
                && p["decisions"].as_array().is_some_and(|d| !d.is_empty())
                && p["status"] == "live"
                && p["replica_hit_rates"].as_array().is_some_and(|h| {
                    h.iter()
                        .any(|x| x.as_str().is_some_and(|x| x.ends_with('%') && x != "0.0%"))
                })
        },
    );
    let replicas_text = first["replicas"].to_string();
    assert!(
        replicas_text.contains("r0") && replicas_text.contains("r1"),
        "{replicas_text}"
    );
    assert!(replicas_text.contains("healthy"), "{replicas_text}");
    assert!(replicas_text.contains(&model), "{replicas_text}");
    let tenants = first["tenants"].as_array().unwrap();
    let acme = tenants
        .iter()
        .filter_map(Value::as_str)
        .find(|t| t.starts_with("acme"))
        .unwrap();
    // acme: 4 requests, prompt and completion tokens counted (not 0).
    let cells: Vec<&str> = acme.split('\t').map(str::trim).collect();
    assert_eq!(cells[1], "4", "{acme:?}");
    assert!(
        cells[2] != "0" && cells[3] != "0",
        "acme's tokens not shown: {acme:?}"
    );
    // Both replicas serve one checkpoint: one row, both replicas, its hit rate.
    let checkpoints = first["checkpoints"].as_array().unwrap();
    assert_eq!(checkpoints.len(), 1, "{checkpoints:?}");
    let row: Vec<&str> = checkpoints[0]
        .as_str()
        .unwrap()
        .split('\t')
        .map(str::trim)
        .collect();
    assert_eq!(row[0], model, "{row:?}");
    assert_eq!(row[3], "2", "replicas on the checkpoint: {row:?}");
    assert!(row[5].ends_with('%') && row[5] != "0.0%", "{row:?}");
    let why = first["decisions"][0].as_str().unwrap();
    assert!(
        why.contains("blocks") && why.contains(" ms"),
        "decision lacks its explanation: {why}"
    );

    // More traffic, in rounds: the page updates by itself after each (server-sent events,
    // no reload), and the chart gains a point per update.
    let mut later = first.clone();
    for round in 0..4 {
        let before_updates = later["updates"].as_u64().unwrap();
        let before_requests = later["requests"].as_str().unwrap().to_string();
        let questions = 4 + 2 * round..6 + 2 * round;
        assert_eq!(traffic(&gw.addr, &model, "sk-acme", &system, questions), 2);
        later = wait_for(
            &browser,
            "new traffic without a reload",
            Duration::from_secs(15),
            |p| {
                p["updates"].as_u64().unwrap_or(0) > before_updates
                    && p["requests"] != before_requests.as_str()
            },
        );
    }
    assert!(
        later["history_points"].as_u64().unwrap() >= 4,
        "too little history for the chart: {later:#}"
    );
    let beta_row = later["tenants"]
        .as_array()
        .unwrap()
        .iter()
        .find_map(|t| t.as_str().filter(|t| t.starts_with("beta")))
        .unwrap();
    assert!(
        beta_row.trim_end().ends_with('2'),
        "beta's two rejections not shown: {beta_row:?}"
    );

    // Expand a decision: every candidate's matched blocks and cost terms.
    let detail = browser.eval(
        "document.querySelector('#decisions tr.decision').click();\
         return new Promise((ok) => setTimeout(() => ok(document.querySelector('#decisions tr.detail')?.innerText || ''), 100));",
    );
    let detail = detail.as_str().unwrap();
    assert!(
        detail.contains("matched blocks") && detail.contains("r0") && detail.contains("r1"),
        "{detail}"
    );

    let png = browser.screenshot();
    assert!(png.starts_with(b"\x89PNG"), "screenshot is not a PNG");
    let exe = std::env::current_exe().unwrap();
    let target = exe.ancestors().nth(3).unwrap().to_path_buf();
    let out = target.join("dashboard.png");
    std::fs::write(&out, &png).unwrap();
    eprintln!(
        "dashboard screenshot: {} ({} bytes)",
        out.display(),
        png.len()
    );
}

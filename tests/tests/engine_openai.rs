#![allow(clippy::unwrap_used)]
//! Done-when (issue 23): the gateway in front of a plain OpenAI-compatible server that
//! serves only `/v1/models`, `/v1/chat/completions` and `/v1/completions`, with
//! `tokenizer: none`. Answers pass through unchanged (byte for byte against the same
//! request sent directly), and prefix affinity holds on text units: chats sharing a long
//! system prompt follow one upstream, while other prefixes spread.

use serde_json::json;
use std::collections::{HashMap, HashSet};
use warmpath_e2e::http::{get, post_json, post_sse};
use warmpath_e2e::openai_upstream::OpenAiUpstream;
use warmpath_e2e::GatewayProc;

const MODEL: &str = "plain-model";

fn gateway(upstreams: &[&OpenAiUpstream], policy: &str) -> GatewayProc {
    let list: Vec<String> = upstreams
        .iter()
        .map(|u| format!("      - {}", u.url()))
        .collect();
    let yaml = format!(
        "auth: {{enabled: false}}\npolicy: {{type: {policy}}}\n\
         pools:\n  - name: plain\n    engine: openai\n    tokenizer: none\n    upstreams:\n{}\n",
        list.join("\n")
    );
    GatewayProc::spawn(&yaml, &[], upstreams.len()).expect("gateway")
}

fn system_prompt(tag: &str) -> String {
    let mut s = format!("[{tag}] ");
    while s.len() < 1500 {
        s.push_str("You are a meticulous assistant; cite sources and answer in short sentences. ");
    }
    s
}

#[test]
fn answers_pass_through_unchanged() {
    let a = OpenAiUpstream::start(MODEL);
    let b = OpenAiUpstream::start(MODEL);
    let gw = gateway(&[&a, &b], "warm");

    let models = get(&gw.addr, "/v1/models", &[]).unwrap();
    assert_eq!(models.status, 200, "{}", models.text());
    let ids: Vec<String> = models.json().unwrap()["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["id"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(ids, vec![MODEL.to_string()]);

    let chat = json!({"model": MODEL, "max_tokens": 8, "messages": [
        {"role": "system", "content": "Be brief."}, {"role": "user", "content": "Say hello, ünïcode ✓"}]});
    let text = json!({"model": MODEL, "max_tokens": 8, "prompt": "Once upon a time"});
    for (path, body) in [("/v1/chat/completions", &chat), ("/v1/completions", &text)] {
        let via = post_json(&gw.addr, path, &[], body).unwrap();
        let direct = post_json(&a.addr, path, &[], body).unwrap();
        assert_eq!(via.status, 200, "{}", via.text());
        assert_eq!(via.body, direct.body, "{path}: the body changed on the way");
        assert!(via.header("x-warmpath-replica").is_some());
        assert!(via.text().contains("plain_extension"));
    }

    let mut stream = chat.clone();
    stream["stream"] = json!(true);
    let via = post_sse(&gw.addr, "/v1/chat/completions", &[], &stream).unwrap();
    let direct = post_sse(&b.addr, "/v1/chat/completions", &[], &stream).unwrap();
    assert_eq!(via.status, 200);
    assert!(via.clean_end);
    assert_eq!(
        via.events, direct.events,
        "the SSE events changed on the way"
    );
    assert_eq!(via.events.last().map(String::as_str), Some("[DONE]"));

    // The gateway needed nothing but the three OpenAI routes.
    assert!(a.other_paths().is_empty(), "{:?}", a.other_paths());
    assert!(b.other_paths().is_empty(), "{:?}", b.other_paths());
}

/// Sends 40 chats in four interleaved groups, each group sharing a long system prompt;
/// returns (repeat requests that went to an upstream their group used before, repeat
/// requests, upstreams used).
fn affinity(policy: &str) -> (usize, usize, usize) {
    let a = OpenAiUpstream::start(MODEL);
    let b = OpenAiUpstream::start(MODEL);
    let c = OpenAiUpstream::start(MODEL);
    let gw = gateway(&[&a, &b, &c], policy);
    let warm = policy == "warm";
    // Four groups of chats, each group sharing a long system prompt, interleaved.
    let groups = ["alpha", "bravo", "charlie", "delta"];
    let mut homes: HashMap<&str, HashSet<String>> = HashMap::new();
    let mut followed = 0;
    let mut later = 0;
    for i in 0..40 {
        let g = groups[i % groups.len()];
        let body = json!({"model": MODEL, "max_tokens": 4, "messages": [
            {"role": "system", "content": system_prompt(g)},
            {"role": "user", "content": format!("question {i} for {g}?")}]});
        let r = post_json(&gw.addr, "/v1/chat/completions", &[], &body).unwrap();
        assert_eq!(r.status, 200, "{}", r.text());
        let replica = r.header("x-warmpath-replica").unwrap().to_string();
        let seen = homes.entry(g).or_default();
        if !seen.is_empty() {
            later += 1;
            followed += usize::from(seen.contains(&replica));
        }
        seen.insert(replica);
        let predicted: u64 = r
            .header("x-warmpath-predicted-cached-tokens")
            .and_then(|v| v.parse().ok())
            .unwrap_or(0);
        if warm && i >= groups.len() {
            assert!(
                predicted > 0,
                "request {i}: the shared prefix was not predicted"
            );
        }
    }
    let used: HashSet<&String> = homes.values().flatten().collect();
    (followed, later, used.len())
}

#[test]
fn prefix_affinity_holds_without_a_tokenizer() {
    let (followed, later, used) = affinity("warm");
    assert!(
        followed * 10 >= later * 9,
        "only {followed}/{later} repeat requests followed their prefix's upstream"
    );
    assert!(used >= 2, "every prefix went to one upstream");
    // The same requests without prefix routing: the affinity above is the policy's doing.
    let (rr_followed, rr_later, _) = affinity("round_robin");
    assert!(
        rr_followed * 10 < rr_later * 9,
        "round_robin followed {rr_followed}/{rr_later}: the check above proves nothing"
    );
}

/// A pool whose tokenizer file cannot be read is refused at start (the gateway exits naming
/// the key) and on reload (the running config stays, the log names the key); a pool added
/// by a reload registers its upstream.
#[test]
fn bad_pool_configs_are_refused_at_start_and_on_reload() {
    let a = OpenAiUpstream::start(MODEL);
    let bad = "auth: {enabled: false}\npools:\n  - name: plain\n    engine: openai\n    \
               tokenizer: {gguf: /nonexistent/model.gguf}\n    upstreams: [http://127.0.0.1:9]\n";
    let dir = std::env::temp_dir().join(format!("warmpath-e2e-badpool-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("gateway.yaml");
    let port = warmpath_e2e::procs::free_port();
    let admin = warmpath_e2e::procs::free_port();
    std::fs::write(
        &path,
        format!("listen: 127.0.0.1:{port}\nadmin_listen: 127.0.0.1:{admin}\n{bad}"),
    )
    .unwrap();
    let out = std::process::Command::new(warmpath_e2e::procs::bin("gateway"))
        .arg("--config")
        .arg(&path)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "started with a bad pool");
    assert!(stderr.contains("pools[0].tokenizer"), "{stderr}");
    assert!(stderr.contains("/nonexistent/model.gguf"), "{stderr}");

    let gw = gateway(&[&a], "warm");
    let old = std::fs::read_to_string(&gw.config_path).unwrap();
    let head: String = old.lines().take(2).map(|l| format!("{l}\n")).collect();
    std::fs::write(&gw.config_path, format!("{head}{bad}")).unwrap();
    gw.signal("HUP");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while !gw.log().contains("reload rejected") {
        assert!(
            std::time::Instant::now() < deadline,
            "no rejection: {}",
            gw.log()
        );
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    assert!(gw.log().contains("pools[0].tokenizer"), "{}", gw.log());
    let body = json!({"model": MODEL, "max_tokens": 4, "prompt": "still serving"});
    assert_eq!(
        post_json(&gw.addr, "/v1/completions", &[], &body)
            .unwrap()
            .status,
        200
    );

    // A reload that adds a second upstream to the pool registers it.
    let b = OpenAiUpstream::start(MODEL);
    let good = format!(
        "auth: {{enabled: false}}\npools:\n  - name: plain\n    engine: openai\n    upstreams: [{}, {}]\n",
        a.url(),
        b.url()
    );
    std::fs::write(&gw.config_path, format!("{head}{good}")).unwrap();
    gw.signal("HUP");
    gw.wait_ready(2).unwrap();
}

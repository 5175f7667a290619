#![allow(clippy::unwrap_used)]
//! `warmpath up` as a user runs it, with the real `replica` and `gateway` binaries and the
//! real SmolLM2-135M-Instruct model: the stack comes up, the banner names the endpoint,
//! dashboard and key, a chat completion through the gateway answers in English, its
//! identical repeat reports cached prompt tokens, and SIGTERM stops every process started.
//!
//! The stack runs as a [`Stack`] guard: its stdout and stderr are piped and drained by
//! threads (never inherited, so a failing test cannot leave a process holding the test's
//! output open), and on drop it stops `warmpath` and every child it had, SIGKILL last.
//!
//! Needs the model: `scripts/fetch-model.sh` downloads it.

mod support;

use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;
use std::path::PathBuf;
use std::time::{Duration, Instant};
use support::{admin_get, bin, block_on, free_port_pair, Stack, STOP_TIMEOUT};
use warmpath::probe;

const BANNER_TIMEOUT: Duration = Duration::from_secs(120);

/// The default model, where `scripts/fetch-model.sh` puts it.
fn model_path() -> PathBuf {
    let dir = std::env::var_os("WARMPATH_MODEL_DIR").map_or_else(
        || PathBuf::from(std::env::var_os("HOME").unwrap()).join(".cache/warmpath/models"),
        PathBuf::from,
    );
    let p = dir.join("SmolLM2-135M-Instruct.Q4_1.gguf");
    assert!(
        p.is_file(),
        "{} not found: run scripts/fetch-model.sh first (it downloads SmolLM2-135M-Instruct)",
        p.display()
    );
    p
}

fn chat(addr: &str, key: &str, model: &str) -> probe::Reply {
    let body = serde_json::json!({
        "model": model,
        "messages": [
            {"role": "system", "content": "You are a concise geography tutor. Answer in one sentence."},
            {"role": "user", "content": "What is the capital of France?"}
        ],
        "max_tokens": 12, "temperature": 0
    })
    .to_string();
    let auth = format!("Bearer {key}");
    block_on(probe::request(
        addr,
        "POST",
        "/v1/chat/completions",
        &[("Authorization", &auth)],
        Some(&body),
        Duration::from_secs(60),
    ))
    .unwrap()
}

/// Plain English text: mostly ASCII letters and spaces, several words of letters, and at
/// least one common English word (SmolLM2 garbage or a broken engine fails this).
fn assert_english(text: &str) {
    let chars = text.chars().count();
    let plain = text
        .chars()
        .filter(|c| c.is_ascii_alphabetic() || *c == ' ')
        .count();
    let words: Vec<String> = text
        .split(|c: char| !c.is_ascii_alphabetic())
        .filter(|w| w.len() >= 2)
        .map(str::to_ascii_lowercase)
        .collect();
    let common = ["the", "is", "of", "a", "and", "in", "capital", "city"];
    assert!(
        chars > 0
            && plain * 10 >= chars * 8
            && words.len() >= 3
            && words.iter().any(|w| common.contains(&w.as_str())),
        "answer does not look like English: {text:?}"
    );
}

#[test]
fn up_serves_smollm2_caches_and_stops_cleanly() {
    let started = Instant::now();
    bin("replica");
    bin("gateway");
    let model_file = model_path();
    let port = free_port_pair();
    let key = "sk-warmpath-uptest";
    let mut stack = Stack::start(&[
        "--port",
        &port.to_string(),
        "--replicas",
        "2",
        "--threads",
        "1",
        "--model",
        model_file.to_str().unwrap(),
        "--api-key",
        key,
        "--admin-key",
        support::ADMIN_KEY,
    ]);
    let banner = stack.read_until("Press Ctrl-C", BANNER_TIMEOUT);
    let up_after = started.elapsed();
    stack.record_children();
    assert_eq!(
        stack.kids.len(),
        3,
        "expected 2 replicas + gateway: {:?}",
        stack.kids
    );

    let addr = format!("127.0.0.1:{port}");
    let admin = format!("127.0.0.1:{}", port + 1);
    for want in [
        format!("http://{addr}/v1"),
        format!("http://{admin}/dashboard"),
        key.to_string(),
        support::ADMIN_KEY.to_string(),
        "curl -s".to_string(),
        "2 replicas serving SmolLM2-135M-Instruct".to_string(),
    ] {
        assert!(banner.contains(&want), "banner lacks {want:?}:\n{banner}");
    }
    let model = "SmolLM2-135M-Instruct";

    let first = chat(&addr, key, model);
    assert_eq!(
        first.status,
        200,
        "{}",
        String::from_utf8_lossy(&first.body)
    );
    let v = first.json().unwrap();
    let answer = v["choices"][0]["message"]["content"].as_str().unwrap();
    assert_english(answer);
    assert_eq!(v["model"], model, "{v}");

    let second = chat(&addr, key, model);
    assert_eq!(
        second.status,
        200,
        "{}",
        String::from_utf8_lossy(&second.body)
    );
    let v2 = second.json().unwrap();
    let cached = v2["usage"]["prompt_tokens_details"]["cached_tokens"]
        .as_u64()
        .unwrap_or(0);
    if cached == 0 {
        let why = admin_get(&admin, "/dashboard/snapshot.json")
            .and_then(|r| r.json())
            .map(|s| s["decisions"].to_string())
            .unwrap_or_default();
        panic!(
            "the identical repeat reported no cached tokens (first via {:?}, repeat via {:?}): {v2}\nrouting decisions: {why}",
            first.header("x-warmpath-replica"),
            second.header("x-warmpath-replica"),
        );
    }
    assert_eq!(
        v2["choices"][0]["message"]["content"], answer,
        "greedy answers differ"
    );
    assert_eq!(chat(&addr, "sk-wrong", model).status, 401);

    assert_eq!(
        block_on(probe::get(&admin, "/dashboard/snapshot.json"))
            .unwrap()
            .status,
        401,
        "the dashboard needs the admin key"
    );
    let snap = admin_get(&admin, "/dashboard/snapshot.json")
        .unwrap()
        .json()
        .unwrap();
    let replica_addrs: Vec<String> = snap["replicas"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            r["url"]
                .as_str()
                .unwrap()
                .trim_start_matches("http://")
                .to_string()
        })
        .collect();
    assert_eq!(replica_addrs.len(), 2, "{snap}");

    let served_after = started.elapsed();
    kill(Pid::from_raw(stack.pid() as i32), Signal::SIGTERM).unwrap();
    let status = stack.wait(STOP_TIMEOUT).unwrap_or_else(|| {
        panic!(
            "warmpath did not exit within {} s of SIGTERM",
            STOP_TIMEOUT.as_secs()
        )
    });
    assert!(
        status.success(),
        "exit status {status}; stderr:\n{}",
        stack.stderr()
    );
    let rest: Vec<String> = stack.out.try_iter().collect();
    assert!(
        rest.iter().any(|l| l.contains("SIGTERM received")),
        "{rest:?}"
    );
    // warmpath stops its children before it exits: none may still run.
    let live = stack.live_children();
    assert!(
        live.is_empty(),
        "children still running after warmpath exited: {live:?}"
    );
    for a in replica_addrs.iter().chain([&addr, &admin]) {
        assert!(
            std::net::TcpStream::connect(a).is_err(),
            "{a} still accepts connections after warmpath stopped"
        );
    }
    eprintln!(
        "warmpath up: banner after {:.1} s, served after {:.1} s, stopped after {:.1} s; answer {answer:?}, repeat cached {cached} tokens",
        up_after.as_secs_f64(),
        served_after.as_secs_f64(),
        started.elapsed().as_secs_f64()
    );
}

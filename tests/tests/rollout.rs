#![allow(clippy::unwrap_used)]
//! Issue 28, done-when: a live checkpoint rollout on two SmolLM2 replicas loaded as two
//! checkpoints (one GGUF under two `--checkpoint-id`s). The gateway first serves every
//! conversation from the old checkpoint and records their prefixes; a rollout to 50% then
//! pre-warms the new replica with them before it takes its share; conversations stick to
//! one checkpoint; abort returns every one to the old checkpoint; and when the new
//! checkpoint's last replica leaves, its index entries and hot prefixes go with it.

use serde_json::{json, Value};
use std::collections::{HashMap, HashSet};
use std::time::{Duration, Instant};
use warmpath_e2e::fixtures::{model_of, smollm2_model};
use warmpath_e2e::http::{post_json, request};
use warmpath_e2e::{GatewayProc, ReplicaProc};

const OLD: &str = "smollm2@old";
const NEW: &str = "smollm2@new";
const CONVERSATIONS: usize = 12;

/// Each test here runs two SmolLM2 replicas and times their answers against the
/// gateways' health probes: one test at a time, so that tests running side by side on a
/// small machine do not starve each other's replicas into probe timeouts.
fn one_at_a_time() -> std::sync::MutexGuard<'static, ()> {
    static ONE: std::sync::Mutex<()> = std::sync::Mutex::new(());
    ONE.lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

fn admin(g: &GatewayProc, method: &str, path: &str, body: Option<Value>) -> (u16, Value) {
    let bytes = body.map(|b| b.to_string().into_bytes());
    let headers: &[(&str, &str)] = if bytes.is_some() {
        &[("content-type", "application/json")]
    } else {
        &[]
    };
    let r = request(&g.admin, method, path, headers, bytes.as_deref()).unwrap();
    let v = r.json().unwrap_or(Value::Null);
    (r.status, v)
}

/// Conversation `i`'s system prompt: about 200 tokens, distinct from the first token, so
/// every conversation has its own sticky key and its own hot prefix.
fn system(i: usize) -> String {
    let mut s = format!("Conversation {i}: you are assistant number {i}. ");
    while s.len() < 900 {
        s.push_str("Answer questions about the weather in one short sentence. ");
    }
    s
}

/// Turn `k` (0 = the first) of conversation `i`: the system prompt, the first question,
/// then `k` more exchanges. Returns (replica label, cached tokens, prompt tokens).
fn turn(g: &GatewayProc, model: &str, i: usize, k: usize) -> (String, u64, u64) {
    let mut messages = vec![
        json!({"role": "system", "content": system(i)}),
        json!({"role": "user", "content": "What is the weather like?"}),
    ];
    for j in 0..k {
        messages.push(json!({"role": "assistant", "content": format!("Sunny, day {j}.")}));
        messages.push(json!({"role": "user", "content": format!("And on day {}?", j + 1)}));
    }
    let body = json!({
        "model": model, "messages": messages, "max_tokens": 2, "temperature": 0
    });
    let r = post_json(&g.addr, "/v1/chat/completions", &[], &body).unwrap();
    assert_eq!(r.status, 200, "{}", r.text());
    let replica = r.header("x-warmpath-replica").unwrap().to_string();
    let v = r.json().unwrap();
    let cached = v["usage"]["prompt_tokens_details"]["cached_tokens"]
        .as_u64()
        .unwrap_or(0);
    (
        replica,
        cached,
        v["usage"]["prompt_tokens"].as_u64().unwrap(),
    )
}

/// The last 40 lines of the gateway's log, for a failure message.
fn log_tail(g: &GatewayProc) -> String {
    let out = g.stdout();
    let lines: Vec<&str> = out.lines().collect();
    lines[lines.len().saturating_sub(40)..].join("\n")
}

fn rollout_status(g: &GatewayProc) -> Value {
    admin(g, "GET", "/admin/rollouts", None).1
}

#[test]
fn a_live_rollout_prewarms_sticks_and_aborts() {
    let _one = one_at_a_time();
    let model_path = smollm2_model();
    let old = ReplicaProc::spawn_args(&model_path, 0, &["--checkpoint-id", OLD]).unwrap();
    let new = ReplicaProc::spawn_args(&model_path, 0, &["--checkpoint-id", NEW]).unwrap();
    let model = model_of(&old.addr);
    let yaml = format!(
        "auth: {{enabled: false}}\nreplicas:\n  - {}\n  - {}\n\
         rollouts:\n  - {{model: {model}, from: {OLD}, to: {NEW}, percent: 0}}\n",
        old.url(),
        new.url()
    );
    let g = GatewayProc::spawn(&yaml, &[], 2).unwrap();
    let replicas = g.replicas().unwrap();
    let ck_of = checkpoints_of(&g);
    assert_eq!(
        ck_of.values().cloned().collect::<HashSet<_>>(),
        HashSet::from([OLD.to_string(), NEW.to_string()])
    );

    // 1. Share 0: every conversation on the old checkpoint, twice each (the history).
    for i in 0..CONVERSATIONS {
        for _ in 0..2 {
            let (r, _, _) = turn(&g, &model, i, 0);
            assert_eq!(
                ck_of[&r], OLD,
                "conversation {i} left the old checkpoint at 0%"
            );
        }
    }
    let hot = &rollout_status(&g)["hot_prefixes"];
    assert_eq!(hot[OLD].as_u64(), Some(CONVERSATIONS as u64), "{hot}");

    // 2. Roll out to 50% with pre-warm of the 12 hottest prefixes.
    let (status, set) = admin(
        &g,
        "PUT",
        &format!("/admin/rollouts/{model}"),
        Some(json!({"from": OLD, "to": NEW, "percent": 50, "prewarm": {"top_n": CONVERSATIONS}})),
    );
    assert_eq!(status, 200, "{set}");
    let deadline = Instant::now() + Duration::from_secs(120);
    let done = loop {
        let s = rollout_status(&g)["rollouts"][0].clone();
        if s["progress"]["finished"] == json!(true) {
            break s;
        }
        assert!(Instant::now() < deadline, "pre-warm did not finish: {s}");
        std::thread::sleep(Duration::from_millis(200));
    };
    eprintln!("pre-warm: {}", done["progress"]);
    assert_eq!(done["progress"]["planned"], json!(CONVERSATIONS));
    assert_eq!(done["progress"]["done"], json!(CONVERSATIONS));
    assert_eq!(done["progress"]["failed"], json!(0));
    assert_eq!(done["share_percent"].as_f64(), Some(50.0));

    // 3. Sticky: three more turns each; every conversation stays on one checkpoint, and the
    // ones that moved find their prefix already cached on the new replica.
    let mut on: HashMap<usize, String> = HashMap::new();
    let mut first_on_new_cached = Vec::new();
    for i in 0..CONVERSATIONS {
        for t in 0..3 {
            let (r, cached, prompt) = turn(&g, &model, i, t + 1);
            let ck = ck_of[&r].clone();
            match on.get(&i) {
                Some(prev) => assert_eq!(
                    prev,
                    &ck,
                    "conversation {i} switched checkpoint; the gateway's log ends:\n{}",
                    log_tail(&g)
                ),
                None => {
                    on.insert(i, ck.clone());
                }
            }
            if t == 0 && ck == NEW {
                first_on_new_cached.push((cached, prompt));
            }
        }
    }
    let moved = on.values().filter(|c| *c == NEW).count();
    eprintln!("{moved}/{CONVERSATIONS} conversations on the new checkpoint; first turns there (cached, prompt): {first_on_new_cached:?}");
    assert!(
        (2..=CONVERSATIONS - 2).contains(&moved),
        "about half should move at 50%: {moved}"
    );
    for (cached, prompt) in &first_on_new_cached {
        assert!(
            *cached * 10 >= *prompt * 7,
            "pre-warm should have cached the conversation's first turn: {cached} of {prompt}"
        );
    }

    // Metrics: traffic per checkpoint, pre-warm replays, the share. The gateway counts a
    // request in its logging phase, after the client has the whole answer, so the last turn's
    // count may land a moment after the client returns: read until it has (or 5 s pass).
    let new_key = format!(
        "warmpath_gateway_checkpoint_requests_total{{checkpoint=\"{NEW}\",model=\"{model}\"}}"
    );
    let value = |metrics: &str, needle: &str| {
        metrics
            .lines()
            .find(|l| l.starts_with(needle))
            .and_then(|l| l.rsplit(' ').next())
            .and_then(|v| v.parse::<f64>().ok())
            .unwrap_or(0.0)
    };
    let settle = Instant::now() + Duration::from_secs(5);
    let metrics = loop {
        let m = g.metrics().unwrap();
        if value(&m, &new_key) as usize >= moved * 3 || Instant::now() > settle {
            break m;
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let line = |needle: &str| value(&metrics, needle);
    let new_requests = line(&new_key);
    assert_eq!(new_requests as usize, moved * 3, "{metrics}");
    assert_eq!(
        line(&format!(
            "warmpath_gateway_rollout_prewarm_total{{model=\"{model}\",outcome=\"ok\"}}"
        )),
        CONVERSATIONS as f64
    );
    assert_eq!(
        line(&format!(
            "warmpath_gateway_rollout_share{{model=\"{model}\"}}"
        )),
        0.5
    );
    // The dashboard's checkpoint rows.
    let snap = g
        .admin_get("/dashboard/snapshot.json")
        .unwrap()
        .json()
        .unwrap();
    let rows = snap["checkpoints"].as_array().unwrap();
    let row = rows.iter().find(|r| r["checkpoint"] == json!(NEW)).unwrap();
    assert_eq!(row["rollout_role"], json!("to"));
    assert!(row["hit_rate"].as_f64().unwrap() > 0.5, "{row}");

    // 4. Abort: every conversation back on the old checkpoint.
    let (status, aborted) = admin(&g, "POST", &format!("/admin/rollouts/{model}/abort"), None);
    assert_eq!(status, 200, "{aborted}");
    assert_eq!(aborted["share_percent"].as_f64(), Some(0.0));
    for i in 0..CONVERSATIONS {
        let (r, _, _) = turn(&g, &model, i, 4);
        assert_eq!(ck_of[&r], OLD, "conversation {i} not back after abort");
    }

    // 5. The new checkpoint's last replica leaves: its index entries and hot prefixes go.
    let new_id = replicas
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["checkpoint"] == json!(NEW))
        .unwrap()["id"]
        .as_u64()
        .unwrap();
    let before = g.admin_get("/admin/index").unwrap().json().unwrap();
    assert!(rollout_status(&g)["hot_prefixes"][NEW].as_u64().unwrap() > 0);
    let (status, _) = admin(&g, "DELETE", &format!("/admin/replicas/{new_id}"), None);
    assert_eq!(status, 200);
    let after = g.admin_get("/admin/index").unwrap().json().unwrap();
    let old_blocks = g.replicas().unwrap()[0]["indexed_blocks"].as_u64().unwrap();
    eprintln!("index before {before}, after {after}; old replica holds {old_blocks}");
    assert!(after["precise_entries"].as_u64() < before["precise_entries"].as_u64());
    assert_eq!(after["precise_entries"].as_u64(), Some(old_blocks));
    assert!(rollout_status(&g)["hot_prefixes"].get(NEW).is_none());
}

/// Polls `g`'s `/admin/rollouts` until `ok` holds for its first rollout (or none, when
/// `ok` accepts `Value::Null`).
fn until_rollout(g: &GatewayProc, what: &str, ok: impl Fn(&Value) -> bool) -> Duration {
    let start = Instant::now();
    loop {
        let s = rollout_status(g)["rollouts"][0].clone();
        if ok(&s) {
            return start.elapsed();
        }
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "{what} never seen: {s}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Label -> checkpoint on one gateway (labels are per gateway).
fn checkpoints_of(g: &GatewayProc) -> HashMap<String, String> {
    g.replicas()
        .unwrap()
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            (
                format!("r{}", r["id"]),
                r["checkpoint"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

#[test]
fn a_rollout_set_through_one_gateway_holds_across_the_fleet() {
    let _one = one_at_a_time();
    let f = shared::Fleet::start();
    let (model, a, b) = (f.model.clone(), &f.a, &f.b);
    let (ck_a, ck_b) = (checkpoints_of(a), checkpoints_of(b));
    let on = |g: &GatewayProc, i: usize, k: usize| {
        let (r, _, _) = turn(g, &model, i, k);
        if std::ptr::eq(g, a) {
            ck_a[&r].clone()
        } else {
            ck_b[&r].clone()
        }
    };
    // History on A (the gateway that will pre-warm): 8 conversations, all on old (without
    // a rollout, the tie between one replica each goes to the greatest id, "smollm2@old").
    const N: usize = 8;
    for i in 0..N {
        for _ in 0..2 {
            assert_eq!(on(a, i, 0), OLD);
        }
    }

    // Set through A; B follows, with A's pre-warm progress.
    let body = json!({"from": OLD, "to": NEW, "percent": 50, "prewarm": {"top_n": N}});
    let (status, set) = admin(a, "PUT", &format!("/admin/rollouts/{model}"), Some(body));
    assert_eq!(status, 200, "{set}");
    let seen = until_rollout(b, "the rollout, warmed, on B", |s| {
        s["progress"]["finished"] == json!(true) && s["share_percent"].as_f64() == Some(50.0)
    });
    eprintln!("B followed A's rollout and its finished pre-warm after {seen:?}");
    let prewarms = |g: &GatewayProc| {
        let m = g.metrics().unwrap();
        m.lines()
            .filter(|l| l.starts_with("warmpath_gateway_rollout_prewarm_total"))
            .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
            .sum::<f64>()
    };
    assert_eq!(prewarms(a), N as f64, "A replays its history once");
    assert_eq!(prewarms(b), 0.0, "B does not replay");

    // One conversation, two gateways: one checkpoint.
    let mut moved = 0;
    for i in 0..N {
        let via_a = on(a, i, 1);
        let via_b = on(b, i, 2);
        assert_eq!(via_a, via_b, "conversation {i} split across gateways");
        moved += usize::from(via_a == NEW);
    }
    assert!((1..N).contains(&moved), "about half should move: {moved}");

    // Abort through B reaches A; every conversation through A is back on old.
    let (status, _) = admin(b, "POST", &format!("/admin/rollouts/{model}/abort"), None);
    assert_eq!(status, 200);
    let seen = until_rollout(a, "the abort on A", |s| s["state"] == json!("aborted"));
    eprintln!("A saw B's abort after {seen:?}");
    for i in 0..N {
        assert_eq!(on(a, i, 3), OLD, "conversation {i} not back after abort");
    }

    // Ended through A: gone from B.
    let (status, _) = admin(a, "DELETE", &format!("/admin/rollouts/{model}"), None);
    assert_eq!(status, 200);
    until_rollout(b, "the end on B", Value::is_null);
}

#[path = "rollout/shared.rs"]
mod shared;

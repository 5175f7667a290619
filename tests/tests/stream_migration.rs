#![allow(clippy::unwrap_used)]
//! Stream migration (issue 41), with real replicas: 24 streams in flight (half greedy,
//! half sampled with a seed), the replica serving them killed (SIGKILL) or stopped past
//! the idle timeout (SIGSTOP) mid-stream; every client still gets its whole answer, token for token the answer of an
//! uninterrupted run, as one stream (one id, one role chunk, one finish, one usage block
//! with the prompt once and the completion across the seam, one `[DONE]`).

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use warmpath_e2e::fixtures::{model_of, replicas_yaml, smollm2_model};
use warmpath_e2e::http::{post_json, post_sse_watched, Sse};
use warmpath_e2e::{GatewayProc, ReplicaProc};

const STREAMS: usize = 24;
const MAX_TOKENS: u32 = 96;
const SYSTEM: &str = "You are a careful assistant for a hardware store. Answer in full \
    sentences, mention the aisle where each item is found, and keep a friendly tone.";

/// Question `i`: greedy when `i` is even, sampled with a seed when odd (a seeded answer
/// must resume at its place in the random stream).
fn body(model: &str, i: usize, stream: bool) -> serde_json::Value {
    let (temperature, seed) = if i.is_multiple_of(2) {
        (0.0, None)
    } else {
        (0.8, Some(i as u64))
    };
    serde_json::json!({
        "model": model,
        "messages": [
            {"role": "system", "content": SYSTEM},
            {"role": "user", "content": format!("Question {i}: where do I find item number {}?", i * 7 + 3)},
        ],
        "max_tokens": MAX_TOKENS, "temperature": temperature, "seed": seed,
        "ignore_eos": true, "stream": stream,
        "stream_options": {"include_usage": true},
    })
}

/// An uninterrupted answer: `(text, prompt_tokens, completion_tokens)`.
type Answer = (String, u64, u64);

/// Every question's answer straight from one replica, nothing failing.
fn reference(addr: &str, model: &str) -> Vec<Answer> {
    let handles: Vec<_> = (0..STREAMS)
        .map(|i| {
            let (addr, b) = (addr.to_string(), body(model, i, false));
            std::thread::spawn(move || {
                let r = post_json(&addr, "/v1/chat/completions", &[], &b).unwrap();
                assert_eq!(r.status, 200, "{}", r.text());
                let v = r.json().unwrap();
                (
                    v["choices"][0]["message"]["content"]
                        .as_str()
                        .unwrap()
                        .to_string(),
                    v["usage"]["prompt_tokens"].as_u64().unwrap(),
                    v["usage"]["completion_tokens"].as_u64().unwrap(),
                )
            })
        })
        .collect();
    handles.into_iter().map(|h| h.join().unwrap()).collect()
}

/// Checks one client's stream is whole and one stream; returns its answer.
fn one_stream(sse: &Sse) -> Answer {
    assert_eq!(sse.status, 200);
    assert!(sse.clean_end, "{}", sse.raw);
    assert!(!sse.raw.contains("warmpath-"), "a tag reached the client");
    let done = sse.events.iter().filter(|e| *e == "[DONE]").count();
    assert_eq!(done, 1, "{:?}", sse.events);
    assert_eq!(sse.events.last().map(String::as_str), Some("[DONE]"));
    let chunks: Vec<serde_json::Value> = sse.events[..sse.events.len() - 1]
        .iter()
        .map(|e| serde_json::from_str(e).unwrap())
        .collect();
    assert!(
        chunks.iter().all(|c| c.get("error").is_none()),
        "{:?}",
        sse.events
    );
    let (id, created) = (&chunks[0]["id"], &chunks[0]["created"]);
    for c in &chunks {
        assert_eq!((&c["id"], &c["created"]), (id, created), "one stream: {c}");
    }
    let count = |f: &dyn Fn(&serde_json::Value) -> bool| chunks.iter().filter(|c| f(c)).count();
    assert_eq!(count(&|c| !c["choices"][0]["delta"]["role"].is_null()), 1);
    assert_eq!(count(&|c| !c["choices"][0]["finish_reason"].is_null()), 1);
    let usage: Vec<&serde_json::Value> = chunks
        .iter()
        .filter(|c| !c["usage"].is_null())
        .map(|c| &c["usage"])
        .collect();
    assert_eq!(usage.len(), 1, "{:?}", sse.events);
    let text: String = chunks
        .iter()
        .filter_map(|c| c["choices"][0]["delta"]["content"].as_str())
        .collect();
    (
        text,
        usage[0]["prompt_tokens"].as_u64().unwrap(),
        usage[0]["completion_tokens"].as_u64().unwrap(),
    )
}

/// The mean of a histogram's observations, from its `_sum` and `_count`.
fn mean(gw: &GatewayProc, name: &str) -> f64 {
    let text = gw.metrics().unwrap();
    let read = |suffix: &str| {
        text.lines()
            .find(|l| l.starts_with(&format!("{name}{suffix} ")))
            .and_then(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
            .unwrap_or(0.0)
    };
    read("_sum") / read("_count").max(1.0)
}

fn migrations(gw: &GatewayProc, outcome: &str) -> u64 {
    let want = format!("warmpath_gateway_stream_migrations_total{{outcome=\"{outcome}\"}}");
    gw.metrics()
        .unwrap()
        .lines()
        .filter(|l| l.starts_with(&want))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum::<f64>() as u64
}

/// 24 streams through the gateway; once each has its first text, `fault` strikes the
/// replica that holds the shared prompt. Returns the gateway and every client's stream.
fn streams_through_a_fault(fault: impl FnOnce(&mut ReplicaProc)) -> (GatewayProc, Vec<Sse>) {
    let model_path = smollm2_model();
    let mut replicas: Vec<ReplicaProc> = (0..2)
        .map(|_| ReplicaProc::spawn(&model_path).unwrap())
        .collect();
    let model = model_of(&replicas[0].addr);
    let want = reference(&replicas[1].addr, &model);
    let urls: Vec<String> = replicas.iter().map(ReplicaProc::url).collect();
    // A whole batch migrates at once: the retry budget must let it.
    let yaml = format!(
        "auth: {{enabled: false}}\n{}retry: {{max_migrations: 1, budget_floor_per_s: 100}}\n\
         timeouts: {{first_token_ms: 20000, idle_ms: 8000}}\n",
        replicas_yaml(&urls)
    );
    let gw = GatewayProc::spawn(&yaml, &[], 2).unwrap();
    let progress: Arc<Vec<AtomicUsize>> =
        Arc::new((0..STREAMS).map(|_| AtomicUsize::new(0)).collect());
    let handles: Vec<_> = (0..STREAMS)
        .map(|i| {
            let (addr, b, p) = (gw.addr.clone(), body(&model, i, true), progress.clone());
            std::thread::spawn(move || {
                let events = |c: &[u8]| c.windows(5).filter(|w| w == b"data:").count();
                let sse = post_sse_watched(&addr, "/v1/chat/completions", &[], &b, &|c| {
                    p[i].fetch_add(events(c), Ordering::SeqCst);
                })
                .unwrap();
                p[i].store(usize::MAX, Ordering::SeqCst);
                sse
            })
        })
        .collect();
    // Every stream under way (role chunk and some text), none near its end.
    let deadline = Instant::now() + Duration::from_secs(120);
    while progress.iter().any(|p| p.load(Ordering::SeqCst) < 4) {
        let now: Vec<usize> = progress.iter().map(|p| p.load(Ordering::SeqCst)).collect();
        assert!(
            Instant::now() < deadline,
            "the streams never got going: {now:?}\n{}",
            gw.log()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    let at_fault: Vec<usize> = progress.iter().map(|p| p.load(Ordering::SeqCst)).collect();
    eprintln!("events per stream at the fault (MAX: done): {at_fault:?}");
    // The replica holding the shared system prompt serves them (`warm`).
    let holder = gw
        .replicas()
        .unwrap()
        .as_array()
        .unwrap()
        .iter()
        .max_by_key(|r| r["in_flight"].as_u64().unwrap_or(0))
        .unwrap()["url"]
        .as_str()
        .unwrap()
        .to_string();
    fault(replicas.iter_mut().find(|r| r.url() == holder).unwrap());
    let got: Vec<Sse> = handles.into_iter().map(|h| h.join().unwrap()).collect();
    for (i, sse) in got.iter().enumerate() {
        let answer = one_stream(sse);
        assert_eq!(
            answer, want[i],
            "stream {i} differs from the uninterrupted run"
        );
    }
    (gw, got)
}

#[test]
fn streams_of_a_killed_replica_continue_token_for_token_on_another() {
    let (gw, _) = streams_through_a_fault(|r| r.kill());
    let ok = migrations(&gw, "ok");
    let resume = mean(&gw, "warmpath_gateway_stream_migration_resume_seconds");
    eprintln!("{ok} streams migrated; failure to first continued event: mean {resume:.3} s");
    assert!(resume > 0.0, "the continuation's first event is timed");
    assert!(ok >= 1, "nothing migrated:\n{}", gw.log());
    assert_eq!(migrations(&gw, "failed"), 0);
    assert_eq!(migrations(&gw, "refused"), 0);
    assert!(
        gw.log().contains("stream migrating"),
        "the gateway's log shows the seam"
    );
    let decisions = gw
        .admin_get("/admin/decisions?limit=100")
        .unwrap()
        .json()
        .unwrap();
    let seams = decisions
        .as_array()
        .unwrap()
        .iter()
        .filter(|d| d["migrations"].as_array().is_some_and(|m| !m.is_empty()))
        .count() as u64;
    assert_eq!(seams, ok, "the decision log shows every seam: {decisions}");
}

#[test]
fn streams_of_a_stopped_replica_continue_after_the_idle_timeout() {
    let (gw, _) = streams_through_a_fault(|r| r.pause());
    let ok = migrations(&gw, "ok");
    eprintln!("{ok} streams migrated");
    assert!(ok >= 1, "nothing migrated:\n{}", gw.log());
    assert_eq!(migrations(&gw, "failed"), 0);
}

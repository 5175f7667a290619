#![allow(clippy::unwrap_used)]
//! Issue 39, item 1: request bodies far past Pingora's 64 KiB retry buffer. A 4 MiB chat
//! (a long document as the system prompt) reaches a plain OpenAI upstream whole, is routed
//! by prefix (the next turn goes to the same upstream with the cached tokens predicted),
//! and is sent whole again to another upstream when the first refuses it before the first
//! byte. The gateway-wide budget of body bytes in flight refuses a request it cannot hold
//! with 503 at once, and 64 such bodies in flight keep the gateway's memory bounded.

use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};
use warmpath_e2e::http::{post_json, raw};
use warmpath_e2e::openai_upstream::OpenAiUpstream;
use warmpath_e2e::{GatewayProc, HttpResponse};

const MIB: usize = 1 << 20;

fn gateway(upstreams: &[&OpenAiUpstream], limits: &str) -> GatewayProc {
    let list: Vec<String> = upstreams
        .iter()
        .map(|u| format!("      - {}", u.url()))
        .collect();
    let yaml = format!(
        "auth: {{enabled: false}}\n{limits}pools:\n  - name: plain\n    engine: openai\n    \
         tokenizer: none\n    upstreams:\n{}\n",
        list.join("\n")
    );
    GatewayProc::spawn(&yaml, &[], upstreams.len()).expect("gateway")
}

/// A chat whose system prompt is a document of about `bytes` bytes.
fn long_chat(doc: &str, question: &str) -> serde_json::Value {
    serde_json::json!({"model": "plain-model", "max_tokens": 4, "messages": [
        {"role": "system", "content": doc}, {"role": "user", "content": question}]})
}

fn document(bytes: usize) -> String {
    let mut s = String::with_capacity(bytes + 64);
    let mut i = 0;
    while s.len() < bytes {
        s.push_str(&format!(
            "Section {i}: the quarterly figures rose and fell again. "
        ));
        i += 1;
    }
    s
}

fn send(gw: &GatewayProc, body: &serde_json::Value) -> HttpResponse {
    post_json(&gw.addr, "/v1/chat/completions", &[], body).unwrap()
}

/// The upstream URL a response's `x-warmpath-replica` names.
fn upstream_of(gw: &GatewayProc, r: &HttpResponse) -> String {
    let id = r
        .header("x-warmpath-replica")
        .unwrap()
        .trim_start_matches('r');
    let all = gw.replicas().unwrap();
    all.as_array()
        .unwrap()
        .iter()
        .find(|x| x["id"].as_u64().map(|n| n.to_string()).as_deref() == Some(id))
        .and_then(|x| x["url"].as_str())
        .unwrap()
        .to_string()
}

fn predicted(r: &HttpResponse) -> u64 {
    r.header("x-warmpath-predicted-cached-tokens")
        .unwrap_or("0")
        .parse()
        .unwrap()
}

#[test]
fn a_4_mib_chat_is_routed_by_prefix_and_retried_whole() {
    let (a, b) = (
        OpenAiUpstream::start("plain-model"),
        OpenAiUpstream::start("plain-model"),
    );
    let gw = gateway(&[&a, &b], "");
    let doc = document(4 * MIB);
    let first = long_chat(&doc, "What rose?");
    let len = first.to_string().len();
    let start = Instant::now();
    let r1 = send(&gw, &first);
    eprintln!("a {len}-byte chat answered in {:?}", start.elapsed());
    assert_eq!(r1.status, 200, "{}", r1.text());
    let on = upstream_of(&gw, &r1);
    let (hit, other) = if on == a.url() { (&a, &b) } else { (&b, &a) };
    assert_eq!(hit.body_lens().last(), Some(&len), "the body arrived whole");

    // The next turn: the same upstream, with the document predicted cached.
    let second = long_chat(&doc, "What fell?");
    let r2 = send(&gw, &second);
    assert_eq!(r2.status, 200, "{}", r2.text());
    assert_eq!(
        upstream_of(&gw, &r2),
        on,
        "the next turn left the warm upstream"
    );
    // A pool without a tokenizer counts a token per 4 bytes of text: the document is about
    // doc.len() / 4 of them, and nearly all must be predicted cached.
    let cached = predicted(&r2);
    let doc_tokens = (doc.len() / 4) as u64;
    eprintln!("second turn: predicted cached {cached} of the document's ~{doc_tokens} tokens");
    assert!(cached * 10 >= doc_tokens * 9, "{cached} of {doc_tokens}");
    assert_eq!(
        predicted(&r1),
        0,
        "nothing was cached before the first turn"
    );

    // The warm upstream refuses large bodies before any byte: the gateway sends the whole
    // body again to the other one.
    hit.refuse_from(MIB);
    let third = long_chat(&doc, "Why?");
    let len3 = third.to_string().len();
    let r3 = send(&gw, &third);
    assert_eq!(r3.status, 200, "{}", r3.text());
    assert_eq!(upstream_of(&gw, &r3), other.url(), "not retried elsewhere");
    assert_eq!(
        hit.body_lens().last(),
        Some(&len3),
        "the refused attempt's body"
    );
    assert_eq!(other.body_lens().last(), Some(&len3), "the retry's body");
}

/// `n` chats on `doc` sent at once, each from its own thread; their statuses.
fn at_once(gw: &GatewayProc, doc: &Arc<String>, n: usize) -> Vec<JoinHandle<u16>> {
    (0..n)
        .map(|i| {
            let (doc, addr) = (doc.clone(), gw.addr.clone());
            std::thread::spawn(move || {
                let body = long_chat(&doc, &format!("Question {i}?"));
                post_json(&addr, "/v1/chat/completions", &[], &body)
                    .unwrap()
                    .status
            })
        })
        .collect()
}

/// The head of a chat request announcing a body of `len` bytes (none of which is sent).
fn head_only(len: usize) -> String {
    format!(
        "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n\
         Content-Length: {len}\r\n\r\n"
    )
}

/// Resident memory of `pid`, bytes.
fn rss(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let kib: u64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|n| n.parse().ok())
        .unwrap();
    kib * 1024
}

/// The bound stated in docs/configuration.md: the bodies in flight, twice (the gateway's
/// copy and the transient buffers that read and send it), plus 128 MiB for the rest.
fn memory_bound(bodies: usize) -> u64 {
    (2 * bodies + 128 * MIB) as u64
}

#[test]
fn sixty_four_4_mib_bodies_in_flight_keep_memory_bounded() {
    let (a, b) = (
        OpenAiUpstream::start("plain-model"),
        OpenAiUpstream::start("plain-model"),
    );
    let gw = gateway(&[&a, &b], "");
    let idle = rss(gw.pid());
    // Held by the upstreams long enough that all 64 are in flight at once.
    a.set_delay_ms(4000);
    b.set_delay_ms(4000);
    let doc = Arc::new(document(4 * MIB));
    let clients = at_once(&gw, &doc, 64);
    let mut peak = 0;
    let mut held_peak = 0.0f64;
    let deadline = Instant::now() + Duration::from_secs(60);
    while clients.iter().any(|c| !c.is_finished()) && Instant::now() < deadline {
        peak = peak.max(rss(gw.pid()));
        let m = gw.metrics().unwrap();
        let held = m
            .lines()
            .find_map(|l| l.strip_prefix("warmpath_gateway_inflight_body_bytes "))
            .and_then(|v| v.trim().parse::<f64>().ok())
            .unwrap_or(0.0);
        held_peak = held_peak.max(held);
        std::thread::sleep(Duration::from_millis(50));
    }
    let statuses: Vec<u16> = clients.into_iter().map(|c| c.join().unwrap()).collect();
    let bodies = 64 * (4 * MIB + 200);
    eprintln!(
        "RSS idle {} MiB, peak {} MiB with 64 x 4 MiB in flight (bound {} MiB); body bytes held at peak {:.0} MiB",
        idle / MIB as u64,
        peak / MIB as u64,
        memory_bound(bodies) / MIB as u64,
        held_peak / MIB as f64
    );
    assert!(statuses.iter().all(|s| *s == 200), "{statuses:?}");
    assert!(
        held_peak >= (48 * 4 * MIB) as f64,
        "never had most bodies in flight at once: {held_peak}"
    );
    assert!(peak <= memory_bound(bodies), "peak RSS {peak}");
}

#[test]
fn a_body_the_budget_cannot_hold_is_refused_at_once() {
    let a = OpenAiUpstream::start("plain-model");
    let gw = gateway(
        &[&a],
        "limits: {max_body_bytes: 5242880, max_inflight_body_bytes: 10485760}\n",
    );
    a.set_delay_ms(3000);
    let doc = Arc::new(document(4 * MIB));
    let two = at_once(&gw, &doc, 2);
    // Both held by the upstream: 8 MiB of the 10 MiB budget.
    let large = || a.body_lens().iter().filter(|n| **n > MIB).count();
    let start = Instant::now();
    while large() < 2 {
        assert!(start.elapsed() < Duration::from_secs(20), "never in flight");
        std::thread::sleep(Duration::from_millis(20));
    }
    // A third announces 4 MiB and sends none of it: the answer comes from the head alone.
    let len = long_chat(&doc, "One more?").to_string().len();
    let head = head_only(len);
    let sent = Instant::now();
    let third = raw(&gw.addr, head.as_bytes(), Duration::from_secs(5)).unwrap();
    assert_eq!(third.status, 503, "{}", third.text());
    assert!(third.text().contains("overloaded"), "{}", third.text());
    assert!(third.header("retry-after").is_some());
    assert!(
        sent.elapsed() < Duration::from_secs(2),
        "refused only after {:?}",
        sent.elapsed()
    );
    assert_eq!(large(), 2, "the refused request reached the upstream");
    let done: Vec<u16> = two.into_iter().map(|t| t.join().unwrap()).collect();
    assert_eq!(done, [200, 200]);
    // The budget came back: the same request now fits.
    a.set_delay_ms(0);
    let again = send(&gw, &long_chat(&doc, "One more?"));
    assert_eq!(again.status, 200, "{}", again.text());
    // Past `max_body_bytes`: 413 from the Content-Length, before the body is read.
    let head = head_only(6 * MIB);
    let huge = raw(&gw.addr, head.as_bytes(), Duration::from_secs(5)).unwrap();
    assert_eq!(huge.status, 413, "{}", huge.text());
}

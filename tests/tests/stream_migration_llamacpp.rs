#![allow(clippy::unwrap_used)]
//! Done-when (issue 41, item 3): in front of two real `llama-server` processes (SmolLM2,
//! `engine: llamacpp`, the GGUF file as the pool's tokenizer so the gateway's ids are the
//! server's), several greedy chat streams in flight, the server serving them killed
//! (SIGKILL) mid-answer: every client still gets one whole, well-formed stream (one id,
//! one role chunk, one finish, one usage block, one `[DONE]`, no error event), the text it
//! had before the kill is the start of its answer, and its usage counts the prompt once
//! and the completion across the seam. The continuation went by token ids on
//! `/v1/completions`; how close each answer is to an uninterrupted run's is measured and
//! printed (exact answers, common prefix), not asserted: docs/engines.md says why. With
//! `tokenizer: none` (text units) no continuation is possible: those streams end with an
//! error event, and the refusal names why.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use warmpath_e2e::fixtures::smollm2_model;
use warmpath_e2e::http::{post_json, post_sse_watched, Sse};
use warmpath_e2e::llamacpp::LlamaServer;
use warmpath_e2e::GatewayProc;

const ALIAS: &str = "smollm2";
const STREAMS: usize = 8;
const MAX_TOKENS: u64 = 48;
const SYSTEM: &str = "You are a careful assistant for a hardware store. Answer in full \
    sentences, mention the aisle where each item is found, and keep a friendly tone.";

fn body(i: usize, stream: bool) -> serde_json::Value {
    serde_json::json!({
        "model": ALIAS,
        "messages": [
            {"role": "system", "content": SYSTEM},
            {"role": "user", "content": format!("Question {i}: where do I find item number {}?", i * 7 + 3)},
        ],
        "max_tokens": MAX_TOKENS, "temperature": 0, "ignore_eos": true, "stream": stream,
        "stream_options": {"include_usage": true},
    })
}

fn server(model: &str) -> LlamaServer {
    let flags = ["-np", "8", "-c", "8192", "-t", "1", "--cache-ram", "0"];
    LlamaServer::spawn(model, ALIAS, &flags).expect("llama-server")
}

/// `(text, prompt_tokens, completion_tokens, finish_reason)`.
type Answer = (String, u64, u64, String);

/// Every question answered by `server` at once, nothing failing (as the gateway's run
/// sends them: all in flight together).
fn reference(server: &LlamaServer) -> Vec<Answer> {
    let handles: Vec<_> = (0..STREAMS)
        .map(|i| {
            let addr = server.addr.clone();
            std::thread::spawn(move || {
                let r = post_json(&addr, "/v1/chat/completions", &[], &body(i, false)).unwrap();
                assert_eq!(r.status, 200, "{}", r.text());
                let v = r.json().unwrap();
                (
                    v["choices"][0]["message"]["content"]
                        .as_str()
                        .unwrap()
                        .to_string(),
                    v["usage"]["prompt_tokens"].as_u64().unwrap(),
                    v["usage"]["completion_tokens"].as_u64().unwrap(),
                    v["choices"][0]["finish_reason"]
                        .as_str()
                        .unwrap()
                        .to_string(),
                )
            })
        })
        .collect();
    handles.into_iter().map(|h| h.join().unwrap()).collect()
}

/// The content of the whole events in `raw`.
fn content_of(raw: &[u8]) -> String {
    let s = String::from_utf8_lossy(raw);
    let whole = s.rfind("\n\n").map_or("", |end| &s[..end]);
    whole
        .split("\n\n")
        .filter_map(|e| e.strip_prefix("data: "))
        .filter_map(|d| serde_json::from_str::<serde_json::Value>(d).ok())
        .filter_map(|v| {
            v["choices"][0]["delta"]["content"]
                .as_str()
                .map(str::to_string)
        })
        .collect()
}

/// Checks one client's stream is whole and one stream; returns its answer.
fn one_stream(sse: &Sse) -> Answer {
    assert_eq!(sse.status, 200);
    assert!(sse.clean_end, "{}", sse.raw);
    let done = sse.events.iter().filter(|e| *e == "[DONE]").count();
    assert_eq!(done, 1, "{:?}", sse.events);
    assert_eq!(sse.events.last().map(String::as_str), Some("[DONE]"));
    let chunks: Vec<serde_json::Value> = sse.events[..sse.events.len() - 1]
        .iter()
        .map(|e| serde_json::from_str(e).unwrap())
        .collect();
    assert!(
        chunks.iter().all(|c| c.get("error").is_none()),
        "an error event: {:?}",
        sse.events
    );
    // One id throughout (llama-server stamps each chunk's `created` with its own second,
    // so that may differ within a stream, migrated or not).
    let id = &chunks[0]["id"];
    for c in &chunks {
        assert_eq!(&c["id"], id, "one stream: {c}");
        assert!(c["created"].is_u64(), "{c}");
        assert_eq!(c["object"], "chat.completion.chunk", "{c}");
    }
    let count = |f: &dyn Fn(&serde_json::Value) -> bool| chunks.iter().filter(|c| f(c)).count();
    assert_eq!(count(&|c| !c["choices"][0]["delta"]["role"].is_null()), 1);
    let finishes: Vec<&serde_json::Value> = chunks
        .iter()
        .filter(|c| !c["choices"][0]["finish_reason"].is_null())
        .collect();
    assert_eq!(finishes.len(), 1, "{:?}", sse.events);
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
        finishes[0]["choices"][0]["finish_reason"]
            .as_str()
            .unwrap()
            .to_string(),
    )
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

/// `stream_migrations_total{outcome}` once it reaches `want` (each request counts when it
/// settles, just after its client got the end of its stream), or after 30 s.
fn settled(gw: &GatewayProc, outcome: &str, want: u64) -> u64 {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let n = migrations(gw, outcome);
        if n >= want || Instant::now() > deadline {
            return n;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Characters two texts share from their start.
fn common_prefix(a: &str, b: &str) -> usize {
    a.chars().zip(b.chars()).take_while(|(x, y)| x == y).count()
}

/// The gateway in front of `servers` (`tokenizer` the pool's), `STREAMS` chats streaming
/// through it, the server holding most of them killed once each has a few tokens. Returns
/// the gateway, every client's stream and the text each held at the kill.
fn streams_through_a_kill(
    servers: &mut [LlamaServer; 2],
    tokenizer: &str,
) -> (GatewayProc, Vec<Sse>, Vec<String>) {
    let yaml = format!(
        "auth: {{enabled: false}}\n\
         retry: {{max_migrations: 1, budget_floor_per_s: 100}}\n\
         timeouts: {{first_token_ms: 30000, idle_ms: 15000}}\n\
         pools:\n  - name: llama\n    engine: llamacpp\n    tokenizer: {tokenizer}\n\
         \x20   upstreams: [{}, {}]\n",
        servers[0].url(),
        servers[1].url()
    );
    let gw = GatewayProc::spawn(&yaml, &[], 2).unwrap();
    let seen: Arc<Vec<Mutex<Vec<u8>>>> =
        Arc::new((0..STREAMS).map(|_| Mutex::new(Vec::new())).collect());
    let handles: Vec<_> = (0..STREAMS)
        .map(|i| {
            let (addr, seen) = (gw.addr.clone(), seen.clone());
            std::thread::spawn(move || {
                post_sse_watched(&addr, "/v1/chat/completions", &[], &body(i, true), &|c| {
                    seen[i].lock().unwrap().extend_from_slice(c);
                })
                .unwrap()
            })
        })
        .collect();
    // Every stream under way (its role chunk and a few tokens), none near its end.
    let events = |i: usize| {
        let raw = seen[i].lock().unwrap();
        raw.windows(5).filter(|w| w == b"data:").count()
    };
    let deadline = Instant::now() + Duration::from_secs(180);
    while (0..STREAMS).any(|i| events(i) < 5) {
        let now: Vec<usize> = (0..STREAMS).map(events).collect();
        assert!(
            Instant::now() < deadline,
            "the streams never got going: {now:?}\n{}",
            gw.log()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
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
    // What each client holds when the server dies.
    let before: Vec<String> = (0..STREAMS)
        .map(|i| content_of(&seen[i].lock().unwrap()))
        .collect();
    let at_kill: Vec<usize> = (0..STREAMS).map(events).collect();
    servers
        .iter_mut()
        .find(|s| s.url().trim_end_matches('/') == holder.trim_end_matches('/'))
        .expect("the holder is one of the servers")
        .kill();
    eprintln!("events per stream at the kill: {at_kill:?}");
    let got: Vec<Sse> = handles.into_iter().map(|h| h.join().unwrap()).collect();
    (gw, got, before)
}

#[test]
fn streams_of_a_killed_llama_server_continue_on_the_other() {
    let model = smollm2_model();
    let mut servers = [server(&model), server(&model)];
    let want = reference(&servers[1]);
    let (gw, got, before) = streams_through_a_kill(&mut servers, &format!("{{gguf: {model:?}}}"));

    let mut exact = 0;
    let mut prefix_share = 0.0;
    for (i, sse) in got.iter().enumerate() {
        let (text, prompt, completion, finish) = one_stream(sse);
        assert!(
            text.starts_with(&before[i]),
            "stream {i}: the text sent before the kill is not kept:\nbefore {:?}\nafter  {text:?}",
            before[i]
        );
        let (ref_text, ref_prompt, ref_completion, ref_finish) = &want[i];
        assert_eq!(prompt, *ref_prompt, "stream {i}: the prompt counted once");
        assert_eq!(
            (completion, finish.as_str()),
            (*ref_completion, ref_finish.as_str()),
            "stream {i}: the completion counted across the seam, to its bound"
        );
        let common = common_prefix(&text, ref_text);
        exact += usize::from(text == *ref_text);
        prefix_share += common as f64 / ref_text.chars().count().max(1) as f64;
        eprintln!(
            "stream {i}: {} chars before the kill, {common}/{} chars as the uninterrupted answer{}",
            before[i].chars().count(),
            ref_text.chars().count(),
            if text == *ref_text { " (exact)" } else { "" }
        );
    }
    // The decision log has every seam once the clients are done (each is noted before its
    // continuation is sent); the counter follows when each request settles.
    let decisions = gw
        .admin_get("/admin/decisions?limit=100")
        .unwrap()
        .json()
        .unwrap();
    let migrated: Vec<&str> = decisions
        .as_array()
        .unwrap()
        .iter()
        .filter(|d| d["migrations"].as_array().is_some_and(|m| !m.is_empty()))
        .filter_map(|d| d["request_id"].as_str())
        .collect();
    let ok = settled(&gw, "ok", migrated.len() as u64);
    let exact_migrated = got
        .iter()
        .enumerate()
        .filter(|(_, s)| {
            s.header("x-request-id")
                .is_some_and(|id| migrated.contains(&id))
        })
        .filter(|(i, s)| one_stream(s).0 == want[*i].0)
        .count();
    eprintln!(
        "of the {} migrated streams, {exact_migrated} answered exactly as uninterrupted",
        migrated.len()
    );
    eprintln!(
        "{ok} streams migrated; {exact}/{STREAMS} answers exactly the uninterrupted run's; \
         mean common prefix {:.3} of the answer",
        prefix_share / STREAMS as f64
    );
    assert!(ok >= 1, "nothing migrated:\n{}", gw.log());
    assert_eq!(migrations(&gw, "failed"), 0, "{}", gw.log());
    assert_eq!(migrations(&gw, "refused"), 0, "{}", gw.log());
    assert!(
        gw.log().contains("stream migrating"),
        "the gateway's log shows the seam"
    );
    let seams: Vec<&serde_json::Value> = decisions
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|d| d["migrations"].as_array())
        .flatten()
        .collect();
    assert_eq!(
        seams.len() as u64,
        ok,
        "the decision log shows every seam: {decisions}"
    );
    for s in seams {
        assert!(
            s["tokens"].as_u64().unwrap() > 0 && s["text_bytes"].as_u64().unwrap() > 0,
            "a seam by token ids carries the text sent: {s}"
        );
    }
}

#[test]
fn without_a_tokenizer_a_stream_that_sent_text_is_not_continued() {
    let model = smollm2_model();
    let mut servers = [server(&model), server(&model)];
    let (gw, got, _) = streams_through_a_kill(&mut servers, "none");
    // The killed server's streams end with an error event and no `[DONE]`; the others
    // finish as usual.
    let broken = got
        .iter()
        .filter(|s| !s.events.iter().any(|e| e == "[DONE]"))
        .inspect(|s| {
            assert!(
                s.events.last().is_some_and(|e| e.contains("\"error\"")),
                "a stream not continued ends with an error event: {:?}",
                s.events
            );
        })
        .count();
    eprintln!("{broken} streams not continued");
    assert!(broken >= 1, "{}", gw.log());
    assert_eq!(
        settled(&gw, "refused", broken as u64) as usize,
        broken,
        "{}",
        gw.log()
    );
    assert_eq!(migrations(&gw, "ok"), 0);
    assert!(
        gw.log().contains("text_units"),
        "the refusal names its reason:\n{}",
        gw.log()
    );
}

#![allow(clippy::unwrap_used)]
//! Anthropic's Messages API through the gateway: the official Anthropic Python SDK
//! (`messages.create`, `messages.stream`, `x-api-key` auth) against Warmpath's replica,
//! a repeated long-prefix conversation reported as cache reads, and bad requests answered
//! with Anthropic error JSON and the right status.

use serde_json::{json, Value};
use std::process::Command;
use warmpath_e2e::fixtures::{auth_yaml, model_of, replicas_yaml};
use warmpath_e2e::http::post_json;
use warmpath_e2e::{GatewayProc, ReplicaProc};

const KEY: &str = "sk-anthropic-test";

fn stack() -> (ReplicaProc, GatewayProc, String) {
    let replica = ReplicaProc::spawn("dummy:tiny").expect("replica");
    let model = model_of(&replica.addr);
    let yaml = format!(
        "{}{}",
        auth_yaml(&[("sdk", KEY, "")]),
        replicas_yaml(&[replica.url()])
    );
    let gw = GatewayProc::spawn(&yaml, &[], 1).expect("gateway");
    (replica, gw, model)
}

#[test]
fn anthropic_python_sdk_works_through_the_gateway() {
    let has_sdk = Command::new("python3")
        .args(["-c", "import anthropic"])
        .status()
        .is_ok_and(|s| s.success());
    assert!(
        has_sdk,
        "the Anthropic Python SDK is missing: run scripts/ci-deps.sh (pip install anthropic)"
    );
    let (_replica, gw, model) = stack();
    let script = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("python/anthropic_check.py");
    let out = Command::new("python3")
        .arg(script)
        .arg(format!("http://{}", gw.addr))
        .arg(KEY)
        .arg(&model)
        .output()
        .expect("run python");
    assert!(
        out.status.success(),
        "sdk script failed: {}\n{}",
        String::from_utf8_lossy(&out.stderr),
        gw.log()
    );
    let v: Value = serde_json::from_slice(&out.stdout).expect("json line");
    eprintln!("anthropic SDK results: {v}");
    let plain = &v["plain"];
    assert_eq!(plain["type"], "message");
    assert_eq!(plain["role"], "assistant");
    assert_eq!(plain["model"], model.as_str());
    assert!(plain["id"].as_str().unwrap().starts_with("msg_"));
    assert_eq!(plain["content"][0]["type"], "text");
    assert!(!plain["content"][0]["text"].as_str().unwrap().is_empty());
    assert!(
        matches!(
            plain["stop_reason"].as_str(),
            Some("max_tokens" | "end_turn")
        ),
        "{plain}"
    );
    let usage = &plain["usage"];
    let prompt = usage["input_tokens"].as_u64().unwrap()
        + usage["cache_read_input_tokens"].as_u64().unwrap();
    // dummy:tiny is byte-level: the ~1,100-byte system prompt is over 1,000 tokens.
    assert!(prompt > 1000, "{usage}");
    assert!(usage["output_tokens"].as_u64().unwrap() >= 1, "{usage}");

    // The same long prefix again: the replica served it from its cache.
    let repeat = &v["repeat_usage"];
    let cached = repeat["cache_read_input_tokens"].as_u64().unwrap();
    assert!(cached > 0, "the repeat reports cache reads: {repeat}");
    assert_eq!(
        repeat["input_tokens"].as_u64().unwrap() + cached,
        prompt,
        "input_tokens is the uncached rest: {repeat}"
    );

    // Streaming: text collected, the final message carries the usage and a stop reason.
    let final_msg = &v["final"];
    assert!(!v["stream_text"].as_str().unwrap().is_empty(), "{v}");
    assert_eq!(final_msg["content"][0]["text"], v["stream_text"]);
    assert!(final_msg["usage"]["output_tokens"].as_u64().unwrap() >= 1);
    let streamed_prompt = final_msg["usage"]["input_tokens"].as_u64().unwrap()
        + final_msg["usage"]["cache_read_input_tokens"]
            .as_u64()
            .unwrap();
    assert_eq!(
        streamed_prompt, prompt,
        "system and text given as blocks are the same prompt"
    );
    assert!(final_msg["stop_reason"].is_string(), "{final_msg}");
    for ev in [
        "message_start",
        "content_block_start",
        "content_block_delta",
        "content_block_stop",
        "message_delta",
        "message_stop",
    ] {
        assert!(
            v["stream_events"].as_array().unwrap().contains(&json!(ev)),
            "{ev} in {}",
            v["stream_events"]
        );
    }
    assert_eq!(
        v["wrong_key"],
        json!({"status": 401, "type": "authentication_error"})
    );
}

/// Headers, body, and the status, `error.type` and a word of the message expected.
type Case<'a> = (&'a [(&'a str, &'a str)], &'a Value, u16, &'a str, &'a str);

#[test]
fn bad_messages_requests_get_anthropic_errors() {
    let (_replica, gw, model) = stack();
    let ok = json!({"model": model, "max_tokens": 2,
        "messages": [{"role": "user", "content": "hi"}]});
    let key = [("x-api-key", KEY), ("anthropic-version", "2023-06-01")];
    let r = post_json(&gw.addr, "/v1/messages", &key, &ok).unwrap();
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(r.json().unwrap()["type"], "message");
    // The Bearer form works too, alone or naming the same key.
    let bearer = format!("Bearer {KEY}");
    for headers in [
        vec![("authorization", bearer.as_str())],
        vec![("authorization", bearer.as_str()), ("x-api-key", KEY)],
    ] {
        let r = post_json(&gw.addr, "/v1/messages", &headers, &ok).unwrap();
        assert_eq!(r.status, 200, "{headers:?}: {}", r.text());
    }

    let mut no_max = ok.clone();
    no_max.as_object_mut().unwrap().remove("max_tokens");
    let image = json!({"model": model, "max_tokens": 2, "messages": [{"role": "user",
        "content": [{"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "AA=="}}]}]});
    let unknown_block = json!({"model": model, "max_tokens": 2, "messages": [{"role": "user",
        "content": [{"type": "hologram", "text": "x"}]}]});
    let other_model = json!({"model": "no-such-model", "max_tokens": 2,
        "messages": [{"role": "user", "content": "hi"}]});
    let conflicting = [("x-api-key", KEY), ("authorization", "Bearer sk-other")];
    let wrong = [("x-api-key", "sk-wrong")];
    let cases: [Case; 6] = [
        (&key, &no_max, 400, "invalid_request_error", "max_tokens"),
        (&key, &image, 400, "invalid_request_error", "image"),
        (
            &key,
            &unknown_block,
            400,
            "invalid_request_error",
            "hologram",
        ),
        (&key, &other_model, 404, "not_found_error", "no-such-model"),
        (&conflicting, &ok, 400, "invalid_request_error", "x-api-key"),
        (&wrong, &ok, 401, "authentication_error", "API key"),
    ];
    for (headers, body, status, ty, mentions) in cases {
        let r = post_json(&gw.addr, "/v1/messages", headers, body).unwrap();
        assert_eq!(r.status, status, "{body}: {}", r.text());
        let v = r.json().unwrap();
        assert_eq!(v["type"], "error", "{v}");
        assert_eq!(v["error"]["type"], ty, "{v}");
        assert!(
            v["error"]["message"].as_str().unwrap().contains(mentions),
            "{v}"
        );
    }
    // Chat keeps OpenAI's error shape.
    let chat = json!({"model": "no-such-model", "max_tokens": 2,
        "messages": [{"role": "user", "content": "hi"}]});
    let bearer = [("authorization", bearer.as_str())];
    let r = post_json(&gw.addr, "/v1/chat/completions", &bearer, &chat).unwrap();
    assert_eq!(r.status, 404);
    assert_eq!(r.json().unwrap()["error"]["type"], "not_found_error");
    assert!(r.json().unwrap().get("type").is_none());
}

#[test]
fn a_conversation_sent_as_chat_then_as_messages_is_one_prefix() {
    let (_replica, gw, model) = stack();
    let system = "You answer in one word. ".repeat(30);
    let bearer = format!("Bearer {KEY}");
    let chat = json!({"model": model, "max_tokens": 2, "temperature": 0,
        "messages": [{"role": "system", "content": system}, {"role": "user", "content": "Go."}]});
    let r = post_json(
        &gw.addr,
        "/v1/chat/completions",
        &[("authorization", &bearer)],
        &chat,
    )
    .unwrap();
    assert_eq!(r.status, 200, "{}", r.text());
    let chat_prompt = r.json().unwrap()["usage"]["prompt_tokens"]
        .as_u64()
        .unwrap();
    let messages = json!({"model": model, "max_tokens": 2, "temperature": 0, "system": system,
        "messages": [{"role": "user", "content": [{"type": "text", "text": "Go."}]}]});
    let r = post_json(&gw.addr, "/v1/messages", &[("x-api-key", KEY)], &messages).unwrap();
    assert_eq!(r.status, 200, "{}", r.text());
    let usage = r.json().unwrap()["usage"].clone();
    let cached = usage["cache_read_input_tokens"].as_u64().unwrap();
    assert_eq!(
        usage["input_tokens"].as_u64().unwrap() + cached,
        chat_prompt,
        "the same prompt, token for token: {usage}"
    );
    // Everything but the last partial block was the chat's prefix, already computed.
    assert!(
        cached + 16 >= chat_prompt && cached > 0,
        "the chat's blocks serve the messages request: {usage} of {chat_prompt}"
    );
    let metrics = gw.metrics().unwrap();
    assert!(
        metrics.contains("warmpath_gateway_added_latency_seconds_count{endpoint=\"messages\"} 1"),
        "{}",
        metrics
            .lines()
            .filter(|l| l.contains("added_latency_seconds_count"))
            .collect::<Vec<_>>()
            .join("\n")
    );
    // The decision log names each request's own API, oldest first.
    let log = gw
        .admin_get("/admin/decisions?limit=2")
        .unwrap()
        .json()
        .unwrap();
    let apis: Vec<_> = log
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["endpoint"].clone())
        .collect();
    assert_eq!(apis, [json!("chat"), json!("messages")], "{log}");
}

#[test]
fn tool_use_round_trips_through_the_sdk() {
    use warmpath_e2e::openai_upstream::OpenAiUpstream;
    // An engine that answers tool calls (a test double of an engine with tool calling;
    // Warmpath's dummy model never calls a tool).
    let engine = OpenAiUpstream::start("plain-model");
    let yaml = format!(
        "{}pools:\n  - name: plain\n    engine: openai\n    tokenizer: none\n    upstreams:\n      - {}\n",
        auth_yaml(&[("sdk", KEY, "")]),
        engine.url()
    );
    let gw = GatewayProc::spawn(&yaml, &[], 1).expect("gateway");
    let script = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("python/anthropic_tools.py");
    let out = Command::new("python3")
        .arg(script)
        .arg(format!("http://{}", gw.addr))
        .arg(KEY)
        .arg("plain-model")
        .output()
        .expect("run python");
    assert!(
        out.status.success(),
        "sdk script failed: {}\n{}",
        String::from_utf8_lossy(&out.stderr),
        gw.log()
    );
    let v: Value = serde_json::from_slice(&out.stdout).expect("json line");
    eprintln!("anthropic SDK tool results: {v}");
    for m in [&v["plain"], &v["streamed"]] {
        assert_eq!(m["stop_reason"], "tool_use", "{m}");
        let call = &m["content"][0];
        assert_eq!(call["type"], "tool_use", "{m}");
        assert_eq!(call["name"], "lookup");
        assert!(call["id"].as_str().unwrap().starts_with("call_"));
        // The engine's arguments, parsed back into `input` (the stream's from its pieces).
        let echo = call["input"]["echo"].as_str().unwrap();
        assert!(echo.starts_with("echo "), "{m}");
        assert_eq!(m["usage"]["output_tokens"], 2);
        assert_eq!(m["usage"]["input_tokens"], 11);
    }
    assert_eq!(v["plain"]["content"], v["streamed"]["content"]);
    assert!(v["stream_event_types"]
        .as_array()
        .unwrap()
        .contains(&json!("input_json")));
    // The follow-up (tool_use, tool_result, text) was answered; the engine echoes the
    // string contents it got, in order: the tool message's result, then the user's text.
    assert_eq!(v["follow"]["type"], "message");
    assert_eq!(v["follow"]["content"][0]["type"], "text");
    let echoed = v["follow"]["content"][0]["text"].as_str().unwrap();
    assert!(echoed.ends_with("|warm: not cold|Thanks."), "{echoed}");
}

#[test]
fn replica_failures_reach_the_client_as_anthropic_errors() {
    use warmpath_e2e::fixtures::replicas_yaml;
    use warmpath_e2e::mock::{MockReplica, Mode};
    let gateway = |mode: Mode| {
        let mock = MockReplica::start(mode);
        let yaml = format!("auth: {{enabled: false}}\n{}", replicas_yaml(&[mock.url()]));
        let gw = GatewayProc::spawn(&yaml, &[], 1).expect("gateway");
        (mock, gw)
    };
    let body = |stream: bool| {
        json!({"model": "mock", "max_tokens": 8, "stream": stream,
            "messages": [{"role": "user", "content": "u"}]})
    };

    // A stream the replica breaks off: what came is forwarded, then `event: error`.
    let (_mock, gw) = gateway(Mode::CrashMidStream);
    let r = post_json(&gw.addr, "/v1/messages", &[], &body(true)).unwrap();
    assert_eq!(r.status, 200);
    let text = r.text();
    let events: Vec<&str> = text
        .split("\n\n")
        .filter(|e| !e.is_empty())
        .map(|e| e.lines().next().unwrap())
        .collect();
    assert_eq!(events[0], "event: message_start", "{text}");
    assert!(events.contains(&"event: content_block_delta"), "{text}");
    assert_eq!(*events.last().unwrap(), "event: error", "{text}");
    assert!(!text.contains("message_stop"), "{text}");
    let last = text.trim_end().rsplit("data: ").next().unwrap();
    let err: Value = serde_json::from_str(last).unwrap();
    assert_eq!(err["type"], "error");
    assert_eq!(err["error"]["type"], "api_error", "{err}");

    // No replica left to answer: 503 overloaded_error, with Retry-After.
    let (_mock, gw) = gateway(Mode::Status(503));
    let r = post_json(&gw.addr, "/v1/messages", &[], &body(false)).unwrap();
    assert_eq!(r.status, 503, "{}", r.text());
    assert!(r.header("retry-after").is_some());
    assert_eq!(r.json().unwrap()["error"]["type"], "overloaded_error");

    // A replica's own 400 is passed on in Anthropic's shape.
    let (_mock, gw) = gateway(Mode::Status(400));
    let r = post_json(&gw.addr, "/v1/messages", &[], &body(false)).unwrap();
    assert_eq!(r.status, 400, "{}", r.text());
    let v = r.json().unwrap();
    assert_eq!(v["type"], "error", "{v}");
    assert_eq!(v["error"]["type"], "invalid_request_error", "{v}");
}

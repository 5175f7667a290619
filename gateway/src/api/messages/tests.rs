//! The translation both ways: requests to chat bodies (and the chat path's own reading of
//! them), chat answers to messages, and the event-stream translator fed in awkward pieces.

use super::reply::message;
use super::request::{to_chat, Call};
use super::stream::Translator;
use super::Exchange;
use crate::body::request::{parse, Endpoint};
use crate::error::GatewayError;
use serde_json::{json, Value};

fn chat_of(body: Value) -> (Value, Call) {
    let (chat, call) = to_chat(body.to_string().as_bytes()).unwrap();
    (serde_json::from_slice(&chat).unwrap(), call)
}

#[test]
fn a_plain_conversation_is_the_chat_a_chat_client_sends() {
    let (chat, call) = chat_of(json!({"model": "m", "max_tokens": 9, "system": "be brief",
        "messages": [{"role": "user", "content": "hi"},
                     {"role": "assistant", "content": [{"type": "text", "text": "hello"}]},
                     {"role": "user", "content": [{"type": "text", "text": "again",
                        "cache_control": {"type": "ephemeral"}}]}],
        "temperature": 0.5, "top_p": 0.9, "top_k": 4, "stop_sequences": ["END"],
        "metadata": {"user_id": "u1"}, "stream": true}));
    assert_eq!(
        chat,
        json!({"model": "m", "max_tokens": 9, "stream": true,
            "stream_options": {"include_usage": true},
            "temperature": 0.5, "top_p": 0.9, "top_k": 4, "stop": ["END"],
            "messages": [{"role": "system", "content": "be brief"},
                {"role": "user", "content": "hi"},
                {"role": "assistant", "content": "hello"},
                {"role": "user", "content": "again"}]})
    );
    assert_eq!(
        call,
        Call {
            model: "m".into(),
            stream: true,
            stop_sequences: vec!["END".into()]
        }
    );
    // The chat path reads the same prompt from it as from the client's own chat body: same
    // tokens, same block hashes.
    let own = br#"{"model":"m","max_tokens":9,"messages":[{"role":"system","content":"be brief"},
        {"role":"user","content":"hi"},{"role":"assistant","content":"hello"},
        {"role":"user","content":"again"}]}"#;
    let translated = chat.to_string();
    let a = parse(Endpoint::Chat, translated.as_bytes()).unwrap();
    let b = parse(Endpoint::Chat, own).unwrap();
    assert_eq!(a.prompt, b.prompt);
    assert!(a.chat_input.is_none() && b.chat_input.is_none());
    assert_eq!(a.max_tokens, Some(9));
    assert!(a.stream);
}

#[test]
fn tools_tool_use_and_tool_results_become_function_calls_and_tool_messages() {
    let (chat, _) = chat_of(json!({"model": "m", "max_tokens": 5,
        "system": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}],
        "tools": [{"name": "get_weather", "description": "weather",
                   "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}}}],
        "tool_choice": {"type": "tool", "name": "get_weather"},
        "messages": [
            {"role": "user", "content": "weather in Paris?"},
            {"role": "assistant", "content": [
                {"type": "text", "text": "checking"},
                {"type": "tool_use", "id": "toolu_1", "name": "get_weather", "input": {"city": "Paris"}}]},
            {"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": "toolu_1", "content": [{"type": "text", "text": "sunny"}]},
                {"type": "text", "text": "thanks"}]}]}));
    assert_eq!(
        chat["messages"],
        json!([
            {"role": "system", "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]},
            {"role": "user", "content": "weather in Paris?"},
            {"role": "assistant", "content": "checking", "tool_calls": [{"id": "toolu_1",
                "type": "function", "function": {"name": "get_weather", "arguments": "{\"city\":\"Paris\"}"}}]},
            {"role": "tool", "tool_call_id": "toolu_1", "content": "sunny"},
            {"role": "user", "content": "thanks"}])
    );
    assert_eq!(
        chat["tools"],
        json!([{"type": "function", "function": {"name": "get_weather", "description": "weather",
            "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}}])
    );
    assert_eq!(
        chat["tool_choice"],
        json!({"type": "function", "function": {"name": "get_weather"}})
    );
    // The chat path accepts it (and renders it whole: tools, tool calls).
    let text = chat.to_string();
    let p = parse(Endpoint::Chat, text.as_bytes()).unwrap();
    assert!(p.chat_input.is_some());
    for (choice, want) in [
        (json!({"type": "auto"}), json!("auto")),
        (json!({"type": "any"}), json!("required")),
        (json!({"type": "none"}), json!("none")),
    ] {
        let (chat, _) = chat_of(json!({"model": "m", "max_tokens": 1, "tool_choice": choice,
            "messages": [{"role": "user", "content": "x"}]}));
        assert_eq!(chat["tool_choice"], want);
    }
    // A tool-only assistant turn has null content.
    let (chat, _) = chat_of(json!({"model": "m", "max_tokens": 1, "messages": [
        {"role": "user", "content": "x"},
        {"role": "assistant", "content": [{"type": "tool_use", "id": "t", "name": "f", "input": {}}]}]}));
    assert_eq!(chat["messages"][1]["content"], Value::Null);
}

#[test]
fn bad_requests_are_refused_naming_the_problem() {
    let m = |content: Value| json!({"model": "m", "max_tokens": 3, "messages": [{"role": "user", "content": content}]});
    for (body, mentions) in [
        (
            json!({"model": "m", "messages": [{"role": "user", "content": "x"}]}),
            "max_tokens",
        ),
        (
            json!({"model": "m", "max_tokens": 0, "messages": [{"role": "user", "content": "x"}]}),
            "max_tokens",
        ),
        (
            json!({"model": "", "max_tokens": 1, "messages": [{"role": "user", "content": "x"}]}),
            "model",
        ),
        (
            json!({"model": "m", "max_tokens": 1, "messages": []}),
            "messages",
        ),
        (
            json!({"model": "m", "max_tokens": 1, "messages": [{"role": "system", "content": "x"}]}),
            "system",
        ),
        (m(json!([{"type": "image", "source": {}}])), "image"),
        (m(json!([{"type": "text"}])), "text"),
        (m(json!([{"type": "mystery"}])), "mystery"),
        (
            m(json!([{"type": "tool_use", "id": "a", "name": "f", "input": {}}])),
            "assistant",
        ),
        (m(json!(7)), "Messages"),
        (
            json!({"model": "m", "max_tokens": 1, "system": [{"type": "image"}],
            "messages": [{"role": "user", "content": "x"}]}),
            "image",
        ),
    ] {
        match to_chat(body.to_string().as_bytes()) {
            Err(e @ (GatewayError::BadRequest(_) | GatewayError::InvalidBody(_))) => {
                assert_eq!(e.status(), 400);
                assert!(
                    e.to_string().contains(mentions),
                    "{e} should name {mentions}"
                );
            }
            other => panic!("{body}: {:?}", other.map(|(b, _)| String::from_utf8(b))),
        }
    }
    assert!(matches!(
        to_chat(b"{nope"),
        Err(GatewayError::InvalidBody(_))
    ));
}

fn call() -> Call {
    Call {
        model: "m".into(),
        stream: false,
        stop_sequences: vec!["END".into()],
    }
}

#[test]
fn a_chat_answer_becomes_a_message_with_anthropic_usage() {
    let chat = json!({"id": "chatcmpl-7", "object": "chat.completion", "model": "m",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": "hello"},
                     "finish_reason": "length"}],
        "usage": {"prompt_tokens": 100, "completion_tokens": 4, "total_tokens": 104,
                  "prompt_tokens_details": {"cached_tokens": 64}}});
    let v: Value = serde_json::from_slice(&message(chat.to_string().as_bytes(), &call())).unwrap();
    assert_eq!(
        v,
        json!({"id": "msg_chatcmpl-7", "type": "message", "role": "assistant", "model": "m",
            "content": [{"type": "text", "text": "hello"}], "stop_reason": "max_tokens",
            "stop_sequence": null,
            "usage": {"input_tokens": 36, "output_tokens": 4, "cache_read_input_tokens": 64,
                      "cache_creation_input_tokens": 0}})
    );
    let tools = json!({"id": "c", "choices": [{"index": 0, "message": {"role": "assistant",
        "content": null, "tool_calls": [{"id": "call_1", "type": "function",
        "function": {"name": "f", "arguments": "{\"a\":1}"}}]}, "finish_reason": "tool_calls"}],
        "usage": {"prompt_tokens": 5, "completion_tokens": 2, "total_tokens": 7}});
    let v: Value = serde_json::from_slice(&message(tools.to_string().as_bytes(), &call())).unwrap();
    assert_eq!(
        v["content"],
        json!([{"type": "tool_use", "id": "call_1", "name": "f", "input": {"a": 1}}])
    );
    assert_eq!(v["stop_reason"], "tool_use");
    assert_eq!(v["usage"]["input_tokens"], 5);
    assert_eq!(v["usage"]["cache_read_input_tokens"], 0);
    // A stop string the engine names (vLLM's `stop_reason`) is a stop sequence.
    for (finish, matched, reason, seq) in [
        ("stop", json!("END"), "stop_sequence", json!("END")),
        ("stop", json!(null), "end_turn", json!(null)),
        ("stop", json!(151643), "end_turn", json!(null)),
    ] {
        let c = json!({"id": "c", "choices": [{"index": 0, "message": {"role": "assistant",
            "content": "x"}, "finish_reason": finish, "stop_reason": matched}]});
        let v: Value = serde_json::from_slice(&message(c.to_string().as_bytes(), &call())).unwrap();
        assert_eq!(
            (v["stop_reason"].clone(), v["stop_sequence"].clone()),
            (json!(reason), seq)
        );
    }
}

/// Named events (name, data) of an Anthropic event stream.
fn events(sse: &[u8]) -> Vec<(String, Value)> {
    let text = std::str::from_utf8(sse).unwrap();
    assert!(text.is_empty() || text.ends_with("\n\n"), "{text}");
    text.split("\n\n")
        .filter(|e| !e.is_empty())
        .map(|e| {
            let mut lines = e.lines();
            let name = lines.next().unwrap().strip_prefix("event: ").unwrap();
            let data = lines.next().unwrap().strip_prefix("data: ").unwrap();
            assert!(lines.next().is_none());
            let v: Value = serde_json::from_str(data).unwrap();
            if name != "error" {
                assert_eq!(v["type"], name, "the data names its event");
            }
            (name.to_string(), v)
        })
        .collect()
}

fn chunk(delta: Value, finish: Value) -> String {
    let c = json!({"id": "chatcmpl-s", "object": "chat.completion.chunk", "model": "m",
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]});
    format!("data: {c}\n\n")
}

fn chat_stream() -> String {
    let usage = json!({"id": "chatcmpl-s", "object": "chat.completion.chunk", "model": "m",
        "choices": [], "usage": {"prompt_tokens": 30, "completion_tokens": 3, "total_tokens": 33,
        "prompt_tokens_details": {"cached_tokens": 16}}});
    [
        chunk(json!({"role": "assistant"}), json!(null)),
        chunk(json!({"content": "Hé"}), json!(null)),
        chunk(json!({"content": "llo"}), json!(null)),
        chunk(
            json!({"tool_calls": [{"index": 0, "id": "call_9", "type": "function",
            "function": {"name": "f", "arguments": ""}}]}),
            json!(null),
        ),
        chunk(
            json!({"tool_calls": [{"index": 0, "function": {"arguments": "{\"a\":"}}]}),
            json!(null),
        ),
        chunk(
            json!({"tool_calls": [{"index": 0, "function": {"arguments": "1}"}}]}),
            json!("tool_calls"),
        ),
        format!("data: {usage}\n\n"),
        "data: [DONE]\n\n".to_string(),
    ]
    .concat()
}

#[test]
fn the_stream_translates_the_same_whatever_the_cuts() {
    let input = chat_stream();
    let bytes = input.as_bytes();
    let whole = Translator::new(call(), 30).push(bytes, true);
    let evs = events(&whole);
    let names: Vec<&str> = evs.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(
        names,
        [
            "message_start",
            "ping",
            "content_block_start",
            "content_block_delta",
            "content_block_delta",
            "content_block_stop",
            "content_block_start",
            "content_block_delta",
            "content_block_delta",
            "content_block_stop",
            "message_delta",
            "message_stop"
        ]
    );
    assert_eq!(evs[0].1["message"]["usage"]["input_tokens"], 30);
    assert_eq!(evs[0].1["message"]["id"], "msg_chatcmpl-s");
    assert_eq!(
        evs[2].1["content_block"],
        json!({"type": "text", "text": ""})
    );
    assert_eq!(
        evs[3].1["delta"],
        json!({"type": "text_delta", "text": "Hé"})
    );
    assert_eq!(
        evs[6].1,
        json!({"type": "content_block_start", "index": 1, "content_block":
            {"type": "tool_use", "id": "call_9", "name": "f", "input": {}}})
    );
    assert_eq!(
        evs[8].1["delta"],
        json!({"type": "input_json_delta", "partial_json": "1}"})
    );
    assert_eq!(evs[9].1["index"], 1);
    assert_eq!(
        evs[10].1,
        json!({"type": "message_delta", "delta": {"stop_reason": "tool_use", "stop_sequence": null},
            "usage": {"input_tokens": 14, "output_tokens": 3, "cache_read_input_tokens": 16,
                      "cache_creation_input_tokens": 0}})
    );
    // Every cut point (inside a multi-byte character, between `\n` and `\n`), and byte by
    // byte: the same events.
    for cut in 0..bytes.len() {
        let mut t = Translator::new(call(), 30);
        let mut out = t.push(&bytes[..cut], false);
        out.extend(t.push(&bytes[cut..], true));
        assert_eq!(out, whole, "cut at {cut}");
    }
    let mut t = Translator::new(call(), 30);
    let mut out = Vec::new();
    for b in bytes {
        out.extend(t.push(std::slice::from_ref(b), false));
    }
    out.extend(t.push(b"", true));
    assert_eq!(out, whole);
    // CRLF framing reads the same.
    let crlf = input.replace('\n', "\r\n");
    assert_eq!(
        Translator::new(call(), 30).push(crlf.as_bytes(), true),
        whole
    );
}

#[test]
fn stream_errors_and_early_ends_become_error_events() {
    let start = chunk(json!({"content": "a"}), json!(null));
    let err = "data: {\"error\":{\"message\":\"the replica ended the stream early\",\"type\":\"server_error\",\"code\":\"upstream_error\"}}\n\n";
    let out = Translator::new(call(), 1).push(format!("{start}{err}").as_bytes(), true);
    let evs = events(&out);
    let (name, v) = evs.last().unwrap();
    assert_eq!(name, "error");
    assert_eq!(
        v,
        &json!({"type": "error", "error": {"type": "api_error",
        "message": "the replica ended the stream early"}})
    );
    assert!(!evs.iter().any(|(n, _)| n == "message_stop"));
    // No [DONE] and no error: the translator ends it with an error itself.
    let out = Translator::new(call(), 1).push(start.as_bytes(), true);
    assert_eq!(events(&out).last().unwrap().0, "error");
    // An overload mid-stream is an overloaded_error.
    let busy = "data: {\"error\":{\"message\":\"busy\",\"code\":\"overloaded\"}}\n\n";
    let out = Translator::new(call(), 1).push(busy.as_bytes(), true);
    assert_eq!(events(&out)[0].1["error"]["type"], "overloaded_error");
}

#[test]
fn the_exchange_gathers_plain_answers_and_translates_errors() {
    let mut ex = Exchange {
        call: call(),
        ..Exchange::default()
    };
    let chat = json!({"id": "c", "choices": [{"index": 0, "message": {"role": "assistant",
        "content": "hi"}, "finish_reason": "stop"}], "usage": {"prompt_tokens": 2,
        "completion_tokens": 1, "total_tokens": 3}})
    .to_string();
    let (a, b) = chat.as_bytes().split_at(10);
    let mut piece = Some(bytes::Bytes::copy_from_slice(a));
    ex.body(200, &mut piece, false);
    assert!(piece.is_none(), "held back until the end");
    let mut piece = Some(bytes::Bytes::copy_from_slice(b));
    ex.body(200, &mut piece, true);
    let v: Value = serde_json::from_slice(&piece.unwrap()).unwrap();
    assert_eq!(v["content"][0]["text"], "hi");
    assert_eq!(v["stop_reason"], "end_turn");

    let mut ex = Exchange::default();
    let mut piece = Some(bytes::Bytes::from_static(
        br#"{"error":{"message":"too long","type":"invalid_request_error"}}"#,
    ));
    ex.body(400, &mut piece, true);
    let v: Value = serde_json::from_slice(&piece.unwrap()).unwrap();
    assert_eq!(
        v,
        json!({"type": "error", "error": {"type": "invalid_request_error", "message": "too long"}})
    );
}

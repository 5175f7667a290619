//! The translation both ways: Responses requests to chat bodies, chat answers (whole and
//! streamed) to Responses objects and events, and the refusals.

use super::output::{Answer, Meta};
use super::request::{Echo, ResponsesRequest};
use super::stream::StreamTranslator;
use super::*;
use crate::body::request::{parse, Endpoint, Prompt};
use serde_json::{json, Value};

fn chat_of(body: Value, history: &[Value]) -> Value {
    let req = ResponsesRequest::parse(&serde_json::to_vec(&body).unwrap()).unwrap();
    serde_json::from_slice(&req.chat_body(history)).unwrap()
}

#[test]
fn a_string_input_with_instructions_is_the_equivalent_chat() {
    let chat = chat_of(
        json!({"model": "m", "instructions": "Be terse.", "input": "Hi",
            "max_output_tokens": 9, "temperature": 0, "top_p": 0.5}),
        &[],
    );
    assert_eq!(
        chat,
        json!({"model": "m", "messages": [
            {"role": "system", "content": "Be terse."}, {"role": "user", "content": "Hi"}],
            "max_tokens": 9, "temperature": 0, "top_p": 0.5})
    );
    // The gateway's chat path reads it as the same prompt a chat client would send.
    let bytes = serde_json::to_vec(&chat).unwrap();
    let p = parse(Endpoint::Chat, &bytes).unwrap();
    assert_eq!(p.max_tokens, Some(9));
    let Prompt::Chat(m) = p.prompt else {
        panic!("a chat")
    };
    assert_eq!((&*m[0].role, &*m[0].content), ("system", "Be terse."));
    assert_eq!((&*m[1].role, &*m[1].content), ("user", "Hi"));
}

#[test]
fn items_become_messages_tool_calls_and_tool_results() {
    let chat = chat_of(
        json!({"model": "m", "stream": true, "input": [
            {"role": "developer", "content": "rules"},
            {"type": "message", "role": "user", "content": [
                {"type": "input_text", "text": "a"}, {"type": "input_text", "text": "b"}]},
            {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "c"}]},
            {"type": "function_call", "call_id": "call_1", "name": "f", "arguments": "{\"x\":1}"},
            {"type": "function_call", "call_id": "call_2", "name": "g", "arguments": "{}"},
            {"type": "function_call_output", "call_id": "call_1", "output": "42"},
        ], "tools": [{"type": "function", "name": "f", "description": "d",
            "parameters": {"type": "object"}}], "tool_choice": {"type": "function", "name": "f"}}),
        &[],
    );
    assert_eq!(
        chat["messages"],
        json!([
            {"role": "system", "content": "rules"},
            {"role": "user", "content": "ab"},
            {"role": "assistant", "content": "c", "tool_calls": [
                {"id": "call_1", "type": "function", "function": {"name": "f", "arguments": "{\"x\":1}"}},
                {"id": "call_2", "type": "function", "function": {"name": "g", "arguments": "{}"}}]},
            {"role": "tool", "tool_call_id": "call_1", "content": "42"},
        ])
    );
    assert_eq!(
        chat["tools"],
        json!([{"type": "function", "function": {"name": "f", "description": "d",
            "parameters": {"type": "object"}}}])
    );
    assert_eq!(
        chat["tool_choice"],
        json!({"type": "function", "function": {"name": "f"}})
    );
    assert_eq!(chat["stream"], true);
    assert_eq!(chat["stream_options"], json!({"include_usage": true}));
    // The chat path takes it (tools and tool calls render through the full template input).
    let bytes = serde_json::to_vec(&chat).unwrap();
    assert!(parse(Endpoint::Chat, &bytes).unwrap().chat_input.is_some());
}

#[test]
fn a_follow_up_is_the_history_then_the_new_input_after_its_instructions() {
    let history = [
        json!({"role": "user", "content": "one"}),
        json!({"role": "assistant", "content": "two"}),
    ];
    let chat = chat_of(
        json!({"model": "m", "instructions": "sys", "input": "three", "previous_response_id": "resp_x"}),
        &history,
    );
    assert_eq!(
        chat["messages"],
        json!([{"role": "system", "content": "sys"}, history[0], history[1],
            {"role": "user", "content": "three"}])
    );
}

#[test]
fn bad_requests_are_refused_naming_the_field() {
    for (body, field) in [
        (json!({"input": "x"}), "model"),
        (json!({"model": "", "input": "x"}), "model"),
        (json!({"model": "m"}), "input"),
        (json!({"model": "m", "input": 7}), "input"),
        (json!({"model": "m", "input": [7]}), "input"),
        (
            json!({"model": "m", "input": [{"role": "wizard", "content": "x"}]}),
            "role",
        ),
        (
            json!({"model": "m", "input": [{"role": "user", "content": [{"type": "input_image", "image_url": "u"}]}]}),
            "input_image",
        ),
        (
            json!({"model": "m", "input": [{"type": "item_reference", "id": "x"}]}),
            "item_reference",
        ),
        (
            json!({"model": "m", "input": "x", "tools": [{"type": "web_search"}]}),
            "tools",
        ),
        (
            json!({"model": "m", "input": "x", "stream": "yes"}),
            "stream",
        ),
        (
            json!({"model": "m", "input": "x", "max_output_tokens": "9"}),
            "max_output_tokens",
        ),
    ] {
        match ResponsesRequest::parse(&serde_json::to_vec(&body).unwrap()) {
            Err(GatewayError::BadRequest(msg)) => assert!(msg.contains(field), "{body}: {msg}"),
            other => panic!("{body}: {other:?}"),
        }
    }
    assert!(matches!(
        ResponsesRequest::parse(b"[1,2]"),
        Err(GatewayError::InvalidBody(_))
    ));
    let e = GatewayError::PreviousResponseNotFound("resp_nope".into());
    assert_eq!(e.status(), 400);
    let v: Value = serde_json::from_slice(&e.to_json()).unwrap();
    assert_eq!(v["error"]["code"], "previous_response_not_found");
    assert_eq!(v["error"]["param"], "previous_response_id");
    assert_eq!(v["error"]["type"], "invalid_request_error");
}

fn meta() -> Meta {
    Meta {
        id: "resp_1".into(),
        created_at: 7,
        model: "m".into(),
        instructions: Some("sys".into()),
        previous_response_id: None,
        store: true,
        echo: Echo::default(),
    }
}

#[test]
fn a_chat_completion_becomes_a_response_object() {
    let chat = json!({"id": "chatcmpl-1", "object": "chat.completion", "choices": [{"index": 0,
        "message": {"role": "assistant", "content": "hello", "tool_calls": [{"id": "call_9",
            "type": "function", "function": {"name": "f", "arguments": "{}"}}]},
        "finish_reason": "tool_calls"}],
        "usage": {"prompt_tokens": 30, "completion_tokens": 5, "total_tokens": 35,
            "prompt_tokens_details": {"cached_tokens": 16}}});
    let answer = Answer::from_chat(&chat);
    let r = meta().complete(&answer);
    assert_eq!(r["id"], "resp_1");
    assert_eq!(r["object"], "response");
    assert_eq!(r["status"], "completed");
    assert_eq!(r["output"][0]["type"], "message");
    assert_eq!(r["output"][0]["role"], "assistant");
    assert_eq!(
        r["output"][0]["content"][0],
        json!({"type": "output_text", "text": "hello", "annotations": [], "logprobs": []})
    );
    assert_eq!(r["output"][1]["type"], "function_call");
    assert_eq!(r["output"][1]["call_id"], "call_9");
    assert_eq!(r["output"][1]["name"], "f");
    assert_eq!(
        r["usage"],
        json!({"input_tokens": 30, "input_tokens_details": {"cached_tokens": 16},
            "output_tokens": 5, "output_tokens_details": {"reasoning_tokens": 0}, "total_tokens": 35})
    );
    // Back to chat: the assistant turn a follow-up's history holds, which renders as the
    // same input items would.
    assert_eq!(
        answer.chat_message(),
        json!({"role": "assistant", "content": "hello", "tool_calls": [{"id": "call_9",
            "type": "function", "function": {"name": "f", "arguments": "{}"}}]})
    );
    let truncated = Answer::from_chat(&json!({"choices": [{"message": {"content": "x"},
        "finish_reason": "length"}]}));
    let r = meta().complete(&truncated);
    assert_eq!(r["status"], "incomplete");
    assert_eq!(r["incomplete_details"]["reason"], "max_output_tokens");
}

/// The events of an SSE text, as (type, data).
fn events(sse: &[u8]) -> Vec<(String, Value)> {
    let text = std::str::from_utf8(sse).unwrap();
    text.split("\n\n")
        .filter(|e| !e.trim().is_empty())
        .map(|e| {
            let mut lines = e.lines();
            let kind = lines.next().unwrap().strip_prefix("event: ").unwrap();
            let data = lines.next().unwrap().strip_prefix("data: ").unwrap();
            (kind.to_string(), serde_json::from_str(data).unwrap())
        })
        .collect()
}

#[test]
fn a_chat_stream_becomes_the_responses_event_stream_across_any_chunking() {
    let chat = concat!(
        "data: {\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":\"\"}}]}\n\n",
        "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"Hel\"}}]}\n\n",
        "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"lo\"}}]}\n\n",
        "data: {\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":0,\"id\":\"call_1\",\"type\":\"function\",\"function\":{\"name\":\"f\",\"arguments\":\"{\\\"a\\\"\"}}]}}]}\n\n",
        "data: {\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":0,\"function\":{\"arguments\":\":1}\"}}]}}]}\n\n",
        "data: {\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"tool_calls\"}]}\n\n",
        "data: {\"choices\":[],\"usage\":{\"prompt_tokens\":12,\"completion_tokens\":3,\"total_tokens\":15,\"prompt_tokens_details\":{\"cached_tokens\":8}}}\n\n",
        "data: [DONE]\n\n",
    )
    .as_bytes();
    for split in [1, 7, chat.len()] {
        let mut t = StreamTranslator::new(meta());
        let mut out = Vec::new();
        for piece in chat.chunks(split) {
            out.extend(t.push(piece));
        }
        let ev = events(&out);
        let kinds: Vec<&str> = ev.iter().map(|(k, _)| k.as_str()).collect();
        assert_eq!(
            kinds,
            [
                "response.created",
                "response.in_progress",
                "response.output_item.added",
                "response.content_part.added",
                "response.output_text.delta",
                "response.output_text.delta",
                "response.output_item.added",
                "response.function_call_arguments.delta",
                "response.function_call_arguments.delta",
                "response.output_text.done",
                "response.content_part.done",
                "response.output_item.done",
                "response.function_call_arguments.done",
                "response.output_item.done",
                "response.completed",
            ],
            "split {split}"
        );
        for (i, (k, v)) in ev.iter().enumerate() {
            assert_eq!(v["type"], *k);
            assert_eq!(v["sequence_number"], i as u64);
        }
        let deltas: String = ev
            .iter()
            .filter(|(k, _)| k == "response.output_text.delta")
            .map(|(_, v)| v["delta"].as_str().unwrap())
            .collect();
        assert_eq!(deltas, "Hello");
        assert_eq!(ev[9].1["text"], "Hello");
        assert_eq!(ev[12].1["arguments"], "{\"a\":1}");
        let done = &ev[14].1["response"];
        assert_eq!(done["status"], "completed");
        assert_eq!(done["output"][0]["content"][0]["text"], "Hello");
        assert_eq!(done["output"][1]["call_id"], "call_1");
        assert_eq!(done["usage"]["input_tokens_details"]["cached_tokens"], 8);
        assert_eq!(done["usage"]["total_tokens"], 15);
        assert!(t.completed());
        assert_eq!(
            t.answer().chat_message()["tool_calls"][0]["function"]["arguments"],
            "{\"a\":1}"
        );
    }
}

#[test]
fn a_broken_chat_stream_ends_in_response_failed_and_is_not_kept() {
    let mut t = StreamTranslator::new(meta());
    let mut out = t.push(b"data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"a\"}}]}\n\n");
    out.extend(t.push(
        b"data: {\"error\":{\"message\":\"the replica ended the stream early\",\"code\":\"upstream_error\"}}\n\n",
    ));
    let ev = events(&out);
    let kinds: Vec<&str> = ev.iter().map(|(k, _)| k.as_str()).collect();
    assert_eq!(&kinds[kinds.len() - 2..], ["error", "response.failed"]);
    assert!(!t.completed());
}

#[tokio::test]
async fn an_exchange_translates_a_plain_answer_and_keeps_the_conversation() {
    let store = Store::new(10, 1 << 20, std::time::Duration::from_secs(60));
    let body = br#"{"model":"m","instructions":"sys","input":"one"}"#;
    let (mut x, chat) = Exchange::open("t", body, &store, None).await.unwrap();
    assert!(x.pin().is_none());
    assert!(std::str::from_utf8(&chat).unwrap().contains("\"sys\""));
    assert!(x.on_status(200));
    let answer =
        br#"{"choices":[{"message":{"role":"assistant","content":"two"},"finish_reason":"stop"}],
        "usage":{"prompt_tokens":4,"completion_tokens":1,"total_tokens":5}}"#;
    let (a, b) = answer.split_at(20);
    let mut piece = Some(Bytes::copy_from_slice(a));
    x.on_body(&mut piece, false);
    assert_eq!(
        piece.as_deref(),
        Some(&b""[..]),
        "nothing goes out before the end"
    );
    let mut piece = Some(Bytes::copy_from_slice(b));
    x.on_body(&mut piece, true);
    let r: Value = serde_json::from_slice(&piece.unwrap()).unwrap();
    assert_eq!(r["output"][0]["content"][0]["text"], "two");
    let id = r["id"].as_str().unwrap().to_string();
    assert!(id.starts_with("resp_"));
    let (kept, record) = x.record("http://r".into()).unwrap();
    assert_eq!(kept, id);
    store.put("t", &kept, record, None);

    // The follow-up: the whole conversation, pinned to the replica that served it.
    let body = format!(
        r#"{{"model":"m","instructions":"sys","input":"three","previous_response_id":"{id}"}}"#
    );
    let (x, chat) = Exchange::open("t", body.as_bytes(), &store, None)
        .await
        .unwrap();
    assert_eq!(x.pin(), Some("http://r"));
    let chat: Value = serde_json::from_slice(&chat).unwrap();
    let contents: Vec<&str> = chat["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["content"].as_str().unwrap())
        .collect();
    assert_eq!(contents, ["sys", "one", "two", "three"]);

    // Another tenant naming it finds nothing.
    assert!(matches!(
        Exchange::open("u", body.as_bytes(), &store, None).await,
        Err(GatewayError::PreviousResponseNotFound(_))
    ));

    let body = br#"{"model":"m","input":"x","previous_response_id":"resp_unknown"}"#;
    assert!(matches!(
        Exchange::open("t", body, &store, None).await,
        Err(GatewayError::PreviousResponseNotFound(_))
    ));
    // `store: false`: nothing to continue from.
    let (mut x, _) = Exchange::open(
        "t",
        br#"{"model":"m","input":"x","store":false}"#,
        &store,
        None,
    )
    .await
    .unwrap();
    x.on_status(200);
    let mut all = Some(Bytes::from_static(answer));
    x.on_body(&mut all, true);
    assert!(x.record("http://r".into()).is_none());
}

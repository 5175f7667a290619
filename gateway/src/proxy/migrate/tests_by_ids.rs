//! Continuations by token ids: the `/v1/completions` body, the stream read back as the
//! chat's, and the seam as the client sees it.

use super::completions::completion_body;
use super::sent::note_sent;
use super::translate::{stop_across, Resume};
use super::Migration;
use bytes::Bytes;
use serde_json::{json, Value};

fn text_chunk(text: &str, finish: Option<&str>) -> String {
    format!(
        "data: {}\n\n",
        json!({"id": "cmpl-9", "object": "text_completion", "created": 99, "model": "m",
               "choices": [{"index": 0, "text": text, "logprobs": null, "finish_reason": finish}]})
    )
}

/// llama.cpp's last chunk: the finish and the usage together.
fn last_chunk(prompt: u64, completion: u64) -> String {
    format!(
        "data: {}\n\ndata: [DONE]\n\n",
        json!({"id": "cmpl-9", "object": "text_completion", "created": 99, "model": "m",
               "choices": [{"index": 0, "text": "", "finish_reason": "length"}],
               "usage": {"prompt_tokens": prompt, "completion_tokens": completion,
                         "total_tokens": prompt + completion,
                         "prompt_tokens_details": {"cached_tokens": prompt - 1}}})
    )
}

/// The data of each event of `out`.
fn events(out: &[u8]) -> Vec<String> {
    String::from_utf8(out.to_vec())
        .unwrap()
        .split("\n\n")
        .filter(|e| !e.is_empty())
        .map(|e| e.strip_prefix("data: ").expect(e).to_string())
        .collect()
}

fn content(events: &[String]) -> String {
    events
        .iter()
        .filter_map(|e| serde_json::from_str::<Value>(e).ok())
        .filter_map(|v| {
            v["choices"][0]["delta"]["content"]
                .as_str()
                .map(str::to_string)
        })
        .collect()
}

#[test]
fn a_completion_stream_reads_back_as_chat_chunks_with_the_usage_across_the_seam() {
    // The client holds 3 tokens; the chat prompt is 32.
    let mut r = Resume::new("I'm glad", Vec::new(), true, 3, 32);
    let stream = format!(
        "{}{}{}",
        text_chunk(" you", None),
        text_chunk("'re", None),
        last_chunk(35, 2)
    );
    // Cut anywhere: only whole events come out, and the same ones.
    let mut out = Vec::new();
    for piece in stream.as_bytes().chunks(7) {
        out.extend_from_slice(&r.translate(&Bytes::copy_from_slice(piece)));
    }
    let ev = events(&out);
    assert_eq!(ev.last().map(String::as_str), Some("[DONE]"));
    assert_eq!(ev.iter().filter(|e| *e == "[DONE]").count(), 1);
    let chunks: Vec<Value> = ev[..ev.len() - 1]
        .iter()
        .map(|e| serde_json::from_str(e).unwrap())
        .collect();
    assert!(chunks
        .iter()
        .all(|c| c["object"] == "chat.completion.chunk" && c["model"] == "m"));
    assert_eq!(content(&ev), " you're");
    let finishes: Vec<&Value> = chunks
        .iter()
        .filter(|c| !c["choices"][0]["finish_reason"].is_null())
        .collect();
    assert_eq!(finishes.len(), 1);
    assert_eq!(finishes[0]["choices"][0]["finish_reason"], "length");
    assert_eq!(finishes[0]["choices"][0]["delta"], json!({}));
    let usage: Vec<&Value> = chunks.iter().filter(|c| !c["usage"].is_null()).collect();
    assert_eq!(usage.len(), 1, "one usage block");
    assert_eq!(usage[0]["choices"], json!([]));
    let u = &usage[0]["usage"];
    assert_eq!(
        (
            &u["prompt_tokens"],
            &u["completion_tokens"],
            &u["total_tokens"]
        ),
        (&json!(32), &json!(5), &json!(37)),
        "the prompt once, the completion across the seam"
    );
    assert_eq!(u["prompt_tokens_details"]["cached_tokens"], 32);
    // A client that asked for no usage gets none.
    let mut quiet = Resume::new("I'm glad", Vec::new(), false, 3, 32);
    let ev = events(&quiet.translate(&Bytes::from(stream)));
    assert!(ev.iter().all(|e| !e.contains("usage")), "{ev:?}");
    assert_eq!(ev.last().map(String::as_str), Some("[DONE]"));
}

#[test]
fn a_stop_string_split_across_the_seam_still_stops() {
    let stops = vec!["END".to_string(), "\n\n".to_string()];
    // The client got "...EN": the continuation's "D" completes the stop.
    let mut r = Resume::new("the story EN", stops.clone(), true, 4, 10);
    let mut out = r.translate(&Bytes::from(text_chunk("D", None))).to_vec();
    out.extend_from_slice(&r.translate(&Bytes::from(text_chunk(" and more", None))));
    out.extend_from_slice(&r.translate(&Bytes::from(last_chunk(14, 3))));
    let ev = events(&out);
    assert_eq!(content(&ev), "", "nothing of the stop string or after it");
    let v: Value = serde_json::from_str(&ev[0]).unwrap();
    assert_eq!(v["choices"][0]["finish_reason"], "stop");
    assert_eq!(v["model"], "m");
    let u: Value = serde_json::from_str(&ev[1]).unwrap();
    assert_eq!(u["usage"]["completion_tokens"], 5);
    assert_eq!(u["usage"]["prompt_tokens"], 10);
    assert_eq!(ev[2..], ["[DONE]".to_string()], "{ev:?}");

    // "EN" then "TER": no stop; the held text goes out whole, then the rest as it comes.
    let mut r = Resume::new("the story EN", stops.clone(), true, 4, 10);
    let first = r.translate(&Bytes::from(text_chunk("T", None)));
    assert!(
        first.is_empty(),
        "held until two bytes show whether END completes"
    );
    let mut out = r.translate(&Bytes::from(text_chunk("ER", None))).to_vec();
    out.extend_from_slice(&r.translate(&Bytes::from(text_chunk(" ok", None))));
    assert_eq!(content(&events(&out)), "TER ok");

    // A tail that begins no stop string holds nothing back.
    let mut r = Resume::new("the story", stops, true, 4, 10);
    assert_eq!(
        content(&events(&r.translate(&Bytes::from(text_chunk("D", None))))),
        "D"
    );
    // A continuation that ends while held: the finish releases it.
    let mut r = Resume::new("x E", vec!["END".into()], false, 1, 1);
    let mut out = r.translate(&Bytes::from(text_chunk("N", None))).to_vec();
    out.extend_from_slice(&r.translate(&Bytes::from(last_chunk(3, 1))));
    let ev = events(&out);
    assert_eq!(content(&ev), "N");
    assert!(ev.iter().any(|e| e.contains("\"length\"")));
}

#[test]
fn a_stop_across_the_seam_is_one_that_starts_before_it_and_ends_after() {
    let s = |v: &[&str]| v.iter().map(|x| x.to_string()).collect::<Vec<_>>();
    assert!(stop_across("EN", "D", &s(&["END"])));
    assert!(stop_across("é", "x", &s(&["éx"])));
    assert!(!stop_across("EN", "d", &s(&["END"])));
    assert!(
        !stop_across("", "END", &s(&["END"])),
        "the engine's own to find"
    );
    assert!(
        !stop_across("ab", "", &s(&["ab"])),
        "within the tail: not across"
    );
}

#[test]
fn the_completion_body_carries_the_ids_the_rest_of_the_budget_and_the_sampling() {
    let chat = json!({
        "model": "m", "messages": [{"role": "user", "content": "hi"}],
        "max_tokens": 64, "temperature": 0, "top_k": 1, "stop": ["END"], "stream": true,
        "stream_options": {"include_usage": true}, "ignore_eos": true,
    });
    let (body, stops, usage) =
        completion_body(&serde_json::to_vec(&chat).unwrap(), vec![1, 2, 3, 7, 8], 2).unwrap();
    let v: Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(v["prompt"], json!([1, 2, 3, 7, 8]));
    assert_eq!(v["max_tokens"], 62);
    assert!(v.get("messages").is_none());
    assert_eq!(
        (
            &v["model"],
            &v["temperature"],
            &v["top_k"],
            &v["stop"],
            &v["ignore_eos"]
        ),
        (
            &json!("m"),
            &json!(0),
            &json!(1),
            &json!(["END"]),
            &json!(true)
        )
    );
    assert_eq!(v["stream"], true);
    assert_eq!(v["stream_options"]["include_usage"], true);
    assert_eq!((stops, usage), (vec!["END".to_string()], true));
    // `max_completion_tokens` is the chat's bound when given; a bound used up is the end.
    let chat = json!({"model": "m", "messages": [], "max_completion_tokens": 5, "stop": "x"});
    let (body, stops, usage) =
        completion_body(&serde_json::to_vec(&chat).unwrap(), vec![1], 1).unwrap();
    let v: Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(v["max_tokens"], 4);
    assert!(v.get("max_completion_tokens").is_none());
    assert_eq!((stops, usage), (vec!["x".to_string()], false));
    let spent = json!({"model": "m", "messages": [], "max_tokens": 3});
    assert_eq!(
        completion_body(&serde_json::to_vec(&spent).unwrap(), vec![1], 3).unwrap_err(),
        "length"
    );
    for refused in [
        json!({"model": "m", "n": 2}),
        json!({"model": "m", "logprobs": true}),
        json!({"model": "m", "tools": [{"type": "function", "function": {"name": "f"}}]}),
        json!({"model": "m", "response_format": {"type": "json_object"}}),
    ] {
        assert_eq!(
            completion_body(&serde_json::to_vec(&refused).unwrap(), vec![1], 0).unwrap_err(),
            "unsupported_request",
            "{refused}"
        );
    }
}

#[test]
fn what_the_client_got_is_read_from_its_chat_chunks() {
    let (mut text, mut not_text) = (String::new(), false);
    note_sent(
        br#"{"choices":[{"index":0,"delta":{"role":"assistant","content":null}}]}"#,
        &mut text,
        &mut not_text,
    );
    note_sent(
        br#"{"choices":[{"index":0,"delta":{"content":"a\"b\u00e9"}}]}"#,
        &mut text,
        &mut not_text,
    );
    note_sent(
        br#"{"choices":[],"usage":{"prompt_tokens":1}}"#,
        &mut text,
        &mut not_text,
    );
    assert_eq!((text.as_str(), not_text), ("a\"bé", false));
    note_sent(
        br#"{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0}]}}]}"#,
        &mut text,
        &mut not_text,
    );
    assert!(not_text, "a tool call cannot be carried as text");
}

#[test]
fn the_client_sees_one_chat_stream_across_the_seam() {
    let first = concat!(
        "data: {\"id\":\"chatcmpl-1\",\"created\":7,\"object\":\"chat.completion.chunk\",",
        "\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":null}}]}\n\n",
        "data: {\"id\":\"chatcmpl-1\",\"created\":7,\"object\":\"chat.completion.chunk\",",
        "\"choices\":[{\"index\":0,\"delta\":{\"content\":\"I'm\"}}]}\n\n",
        "data: {\"id\":\"chatcmpl-1\",\"created\":7,\"object\":\"chat.completion.chunk\",",
        "\"choices\":[{\"index\":0,\"delta\":{\"content\":\" glad\"}}]}\n\n",
        // The server dies in the middle of the next event.
        "data: {\"id\":\"chatcmpl-1\",\"cre"
    );
    let mut m = Migration::new(Bytes::new());
    let mut out = m.pass(&Bytes::from(first)).to_vec();
    assert_eq!(m.transcript.text, "I'm glad");
    assert!(!m.transcript.tagged && !m.transcript.not_text);
    assert!(m.transcript.splice());
    m.resume = Some(Resume::new(&m.transcript.text, Vec::new(), true, 3, 32));
    m.begin(35);
    assert_eq!(m.upstream_path(), Some("/v1/completions"));
    let second = format!("{}{}", text_chunk(" you", None), last_chunk(35, 1));
    out.extend_from_slice(&m.pass(&Bytes::from(second)));
    let ev = events(&out);
    assert_eq!(content(&ev), "I'm glad you", "no text repeated or missing");
    let chunks: Vec<Value> = ev[..ev.len() - 1]
        .iter()
        .map(|e| serde_json::from_str(e).unwrap())
        .collect();
    for c in &chunks {
        assert_eq!((&c["id"], &c["created"]), (&json!("chatcmpl-1"), &json!(7)));
    }
    assert_eq!(ev.last().map(String::as_str), Some("[DONE]"));
    assert!(m.transcript.ended);
    assert_eq!(m.transcript.text, "I'm glad you", "ready for another seam");
    assert!(m.resume_latency.is_some());
    let usage = chunks.iter().find(|c| !c["usage"].is_null()).unwrap();
    assert_eq!(usage["usage"]["prompt_tokens"], 32);
    assert_eq!(usage["usage"]["completion_tokens"], 4);
}

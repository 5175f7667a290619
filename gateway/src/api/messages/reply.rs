//! A chat completion as an Anthropic message: the text and tool calls as content blocks,
//! the finish reason as `stop_reason`, and the usage as Anthropic counts it (cached prompt
//! tokens are `cache_read_input_tokens`, `input_tokens` the uncached rest).

use super::request::Call;
use serde_json::{json, Value};

/// `stop_reason` and `stop_sequence` of a chat choice's `finish_reason` (and of the stop
/// string an engine names, as vLLM's `stop_reason` does).
pub(crate) fn stop_reason(
    finish: Option<&str>,
    matched: Option<&str>,
    call: &Call,
) -> (&'static str, Value) {
    match finish {
        Some("length") => ("max_tokens", Value::Null),
        Some("tool_calls" | "function_call") => ("tool_use", Value::Null),
        Some("content_filter") => ("refusal", Value::Null),
        _ => match matched.filter(|m| call.stop_sequences.iter().any(|s| s == m)) {
            Some(m) => ("stop_sequence", json!(m)),
            None => ("end_turn", Value::Null),
        },
    }
}

/// Anthropic's usage from a chat usage object (`null` reads as zeros).
pub(crate) fn usage(chat: Option<&Value>) -> Value {
    let n = |p: &str| {
        chat.and_then(|u| u.pointer(p))
            .and_then(Value::as_u64)
            .unwrap_or(0)
    };
    let prompt = n("/prompt_tokens");
    let cached = n("/prompt_tokens_details/cached_tokens").min(prompt);
    json!({
        "input_tokens": prompt - cached,
        "output_tokens": n("/completion_tokens"),
        "cache_read_input_tokens": cached,
        "cache_creation_input_tokens": 0,
    })
}

/// The message id for a chat completion id.
pub(crate) fn message_id(chat_id: Option<&str>) -> String {
    format!("msg_{}", chat_id.unwrap_or("warmpath"))
}

/// A tool call's `arguments` (a JSON text) as the `input` object; anything unparseable
/// is kept as a string under `_raw` rather than lost.
pub(crate) fn tool_input(arguments: &str) -> Value {
    if arguments.trim().is_empty() {
        return json!({});
    }
    serde_json::from_str(arguments).unwrap_or_else(|_| json!({"_raw": arguments}))
}

/// The Anthropic message body for a chat completion body.
pub(crate) fn message(chat: &[u8], call: &Call) -> Vec<u8> {
    let v: Value = match serde_json::from_slice(chat) {
        Ok(v) => v,
        Err(_) => return super::error::from_upstream(502, chat),
    };
    let choice = v.pointer("/choices/0");
    let msg = choice.and_then(|c| c.get("message"));
    let mut content = Vec::new();
    if let Some(text) = msg.and_then(|m| m.get("content")).and_then(Value::as_str) {
        if !text.is_empty() {
            content.push(json!({"type": "text", "text": text}));
        }
    }
    for tc in msg
        .and_then(|m| m.get("tool_calls"))
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        let args = tc
            .pointer("/function/arguments")
            .and_then(Value::as_str)
            .unwrap_or("");
        content.push(json!({
            "type": "tool_use",
            "id": tc.get("id").and_then(Value::as_str).unwrap_or("toolu_0"),
            "name": tc.pointer("/function/name").and_then(Value::as_str).unwrap_or(""),
            "input": tool_input(args),
        }));
    }
    let finish = choice
        .and_then(|c| c.get("finish_reason"))
        .and_then(Value::as_str);
    let matched = choice
        .and_then(|c| c.get("stop_reason"))
        .and_then(Value::as_str);
    let (reason, sequence) = stop_reason(finish, matched, call);
    let out = json!({
        "id": message_id(v.get("id").and_then(Value::as_str)),
        "type": "message",
        "role": "assistant",
        "model": call.model,
        "content": content,
        "stop_reason": reason,
        "stop_sequence": sequence,
        "usage": usage(v.get("usage")),
    });
    serde_json::to_vec(&out).unwrap_or_default()
}

//! A chat completion rendered as a Responses object: the assistant's text as one
//! `message` item with an `output_text` part, each tool call as a `function_call` item,
//! and the chat usage as Responses usage (`input_tokens_details.cached_tokens` from the
//! chat's `prompt_tokens_details.cached_tokens`).

use super::request::Echo;
use serde_json::{json, Value};

/// A fresh id with `prefix` (`resp`, `msg`, `fc`): 24 random bytes in hex.
pub(crate) fn new_id(prefix: &str) -> String {
    let a: u128 = rand::random();
    let b: u64 = rand::random();
    format!("{prefix}_{a:032x}{b:016x}")
}

/// What every rendering of one response shares: its id, when and what it was asked for.
#[derive(Debug, Clone)]
pub(crate) struct Meta {
    /// `resp_...`.
    pub id: String,
    /// Unix seconds.
    pub created_at: u64,
    /// Model asked for.
    pub model: String,
    /// `instructions`.
    pub instructions: Option<String>,
    /// `previous_response_id`.
    pub previous_response_id: Option<String>,
    /// `store`.
    pub store: bool,
    /// Fields repeated from the request.
    pub echo: Echo,
}

/// What the model answered, whichever way it arrived (whole or streamed).
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct Answer {
    /// The assistant's text (`None`: it wrote none).
    pub text: Option<String>,
    /// Tool calls: (call id, name, arguments).
    pub calls: Vec<(String, String, String)>,
    /// The chat `finish_reason`.
    pub finish_reason: Option<String>,
    /// The chat usage object, as the replica reported it.
    pub usage: Option<Value>,
}

impl Answer {
    /// Reads the first choice and the usage of a chat completion.
    pub(crate) fn from_chat(v: &Value) -> Self {
        let choice = &v["choices"][0];
        let msg = &choice["message"];
        let calls = msg["tool_calls"]
            .as_array()
            .map(|calls| {
                calls
                    .iter()
                    .map(|c| {
                        (
                            c["id"]
                                .as_str()
                                .map_or_else(|| new_id("call"), str::to_string),
                            c["function"]["name"].as_str().unwrap_or("").to_string(),
                            c["function"]["arguments"]
                                .as_str()
                                .unwrap_or("")
                                .to_string(),
                        )
                    })
                    .collect()
            })
            .unwrap_or_default();
        Self {
            text: msg["content"].as_str().map(str::to_string),
            calls,
            finish_reason: choice["finish_reason"].as_str().map(str::to_string),
            usage: v.get("usage").filter(|u| u.is_object()).cloned(),
        }
    }

    /// The assistant turn as a chat message (what a follow-up's history holds).
    pub(crate) fn chat_message(&self) -> Value {
        let mut m = json!({"role": "assistant", "content": self.text});
        if !self.calls.is_empty() {
            m["tool_calls"] = self
                .calls
                .iter()
                .map(|(id, name, args)| {
                    json!({"id": id, "type": "function", "function": {"name": name, "arguments": args}})
                })
                .collect();
        }
        m
    }

    /// Whether the answer stopped at the token bound.
    pub(crate) fn truncated(&self) -> bool {
        self.finish_reason.as_deref() == Some("length")
    }
}

/// The Responses usage object for a chat usage object.
pub(crate) fn usage(chat: &Value) -> Value {
    let n = |v: &Value| v.as_u64().unwrap_or(0);
    let input = n(&chat["prompt_tokens"]);
    let output = n(&chat["completion_tokens"]);
    json!({
        "input_tokens": input,
        "input_tokens_details": {"cached_tokens": n(&chat["prompt_tokens_details"]["cached_tokens"])},
        "output_tokens": output,
        "output_tokens_details": {"reasoning_tokens": n(&chat["completion_tokens_details"]["reasoning_tokens"])},
        "total_tokens": chat["total_tokens"].as_u64().unwrap_or(input + output),
    })
}

/// A `message` output item holding `text`.
pub(crate) fn message_item(id: &str, text: &str, status: &str) -> Value {
    json!({
        "id": id,
        "type": "message",
        "role": "assistant",
        "status": status,
        "content": [{"type": "output_text", "text": text, "annotations": [], "logprobs": []}],
    })
}

/// A `function_call` output item.
pub(crate) fn call_item(id: &str, call: &(String, String, String), status: &str) -> Value {
    json!({
        "id": id,
        "type": "function_call",
        "call_id": call.0,
        "name": call.1,
        "arguments": call.2,
        "status": status,
    })
}

impl Meta {
    /// The response object with `status` and `output` (`usage` when known).
    pub(crate) fn object(&self, status: &str, output: Vec<Value>, usage: Option<Value>) -> Value {
        let e = &self.echo;
        json!({
            "id": self.id,
            "object": "response",
            "created_at": self.created_at,
            "status": status,
            "error": null,
            "incomplete_details": if status == "incomplete" {
                json!({"reason": "max_output_tokens"})
            } else {
                Value::Null
            },
            "instructions": self.instructions,
            "max_output_tokens": e.max_output_tokens,
            "model": self.model,
            "output": output,
            "parallel_tool_calls": e.parallel_tool_calls,
            "previous_response_id": self.previous_response_id,
            "store": self.store,
            "temperature": e.temperature,
            "top_p": e.top_p,
            "text": {"format": {"type": "text"}},
            "tool_choice": e.tool_choice,
            "tools": e.tools,
            "truncation": "disabled",
            "metadata": if e.metadata.is_null() { json!({}) } else { e.metadata.clone() },
            "usage": usage,
        })
    }

    /// The whole response object for a complete `answer`.
    pub(crate) fn complete(&self, answer: &Answer) -> Value {
        let status = if answer.truncated() {
            "incomplete"
        } else {
            "completed"
        };
        let mut output = Vec::with_capacity(1 + answer.calls.len());
        if let Some(t) = answer
            .text
            .as_deref()
            .filter(|t| !t.is_empty() || answer.calls.is_empty())
        {
            output.push(message_item(&new_id("msg"), t, status));
        }
        for c in &answer.calls {
            output.push(call_item(&new_id("fc"), c, "completed"));
        }
        self.object(status, output, answer.usage.as_ref().map(usage))
    }
}

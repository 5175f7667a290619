//! A chat-completions event stream as Anthropic's: `message_start` and `ping`, then per
//! content block `content_block_start`, its `content_block_delta`s (`text_delta`,
//! `input_json_delta`) and `content_block_stop`; at the chat's `[DONE]`, `message_delta`
//! (stop reason and the usage) and `message_stop`. An error event becomes `event: error`.
//! Input arrives in pieces cut anywhere: events are read only once their blank line is in.

use super::error;
use super::reply::{message_id, stop_reason, usage};
use super::request::Call;
use serde_json::{json, Value};

/// The open content block.
#[derive(Debug, PartialEq)]
enum Open {
    None,
    Text,
    /// A tool call, by its index in the chat's `tool_calls`.
    Tool(u64),
}

/// One stream's translation state.
#[derive(Debug)]
pub(crate) struct Translator {
    call: Call,
    prompt_tokens: u32,
    /// Bytes of an event not complete yet.
    pending: Vec<u8>,
    started: bool,
    /// The message is over (`message_stop` or `error` sent): the rest is dropped.
    ended: bool,
    open: Open,
    /// Index of the next content block.
    next_index: u64,
    finish: Option<String>,
    matched: Option<String>,
    usage: Option<Value>,
}

/// Appends one named event.
fn emit(out: &mut Vec<u8>, name: &str, data: &Value) {
    out.extend_from_slice(b"event: ");
    out.extend_from_slice(name.as_bytes());
    out.extend_from_slice(b"\ndata: ");
    out.extend_from_slice(&serde_json::to_vec(data).unwrap_or_default());
    out.extend_from_slice(b"\n\n");
}

impl Translator {
    /// A translator for `call`, whose prompt the gateway counted `prompt_tokens`.
    pub(crate) fn new(call: Call, prompt_tokens: u32) -> Self {
        Self {
            call,
            prompt_tokens,
            pending: Vec::new(),
            started: false,
            ended: false,
            open: Open::None,
            next_index: 0,
            finish: None,
            matched: None,
            usage: None,
        }
    }

    /// Translates the next piece of the chat stream; `end`: it is the last. A stream that
    /// ends with neither `[DONE]` nor an error ends with an `error` event.
    pub(crate) fn push(&mut self, input: &[u8], end: bool) -> Vec<u8> {
        let mut out = Vec::new();
        self.pending.extend_from_slice(input);
        while let Some((at, sep)) = event_end(&self.pending) {
            let event: Vec<u8> = self.pending.drain(..at + sep).collect();
            self.event(&event[..at], &mut out);
        }
        if end && !self.ended {
            if !self.pending.is_empty() {
                let rest = std::mem::take(&mut self.pending);
                self.event(&rest, &mut out);
            }
            if !self.ended {
                let cut = json!({"error": {"message": "the model server ended the stream early"}});
                self.fail(&cut, &mut out);
            }
        }
        out
    }

    /// One event's lines (without the blank line that ended it).
    fn event(&mut self, event: &[u8], out: &mut Vec<u8>) {
        if self.ended {
            return;
        }
        let mut data = Vec::new();
        for line in event.split(|&b| b == b'\n') {
            let line = line.strip_suffix(b"\r").unwrap_or(line);
            if let Some(d) = line.strip_prefix(b"data:") {
                if !data.is_empty() {
                    data.push(b'\n');
                }
                data.extend_from_slice(d.strip_prefix(b" ").unwrap_or(d));
            }
        }
        if data.is_empty() {
            return;
        }
        if data == b"[DONE]" {
            self.finish_message(out);
            return;
        }
        let Ok(v) = serde_json::from_slice::<Value>(&data) else {
            return;
        };
        if v.get("error").is_some() {
            self.fail(&v, out);
            return;
        }
        self.start(v.get("id").and_then(Value::as_str), out);
        if let Some(u) = v.get("usage").filter(|u| !u.is_null()) {
            self.usage = Some(u.clone());
        }
        let Some(choice) = v.pointer("/choices/0") else {
            return;
        };
        let delta = choice.get("delta");
        if let Some(text) = delta.and_then(|d| d.get("content")).and_then(Value::as_str) {
            if !text.is_empty() {
                if self.open != Open::Text {
                    self.open_block(Open::Text, json!({"type": "text", "text": ""}), out);
                }
                let d = json!({"type": "content_block_delta", "index": self.next_index - 1,
                    "delta": {"type": "text_delta", "text": text}});
                emit(out, "content_block_delta", &d);
            }
        }
        for tc in delta
            .and_then(|d| d.get("tool_calls"))
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            let i = tc.get("index").and_then(Value::as_u64).unwrap_or(0);
            if self.open != Open::Tool(i) {
                let block = json!({"type": "tool_use",
                    "id": tc.get("id").and_then(Value::as_str).unwrap_or("toolu_0"),
                    "name": tc.pointer("/function/name").and_then(Value::as_str).unwrap_or(""),
                    "input": {}});
                self.open_block(Open::Tool(i), block, out);
            }
            let args = tc.pointer("/function/arguments").and_then(Value::as_str);
            if let Some(args) = args.filter(|a| !a.is_empty()) {
                let d = json!({"type": "content_block_delta", "index": self.next_index - 1,
                    "delta": {"type": "input_json_delta", "partial_json": args}});
                emit(out, "content_block_delta", &d);
            }
        }
        if let Some(f) = choice.get("finish_reason").and_then(Value::as_str) {
            self.finish = Some(f.to_string());
            self.matched = choice
                .get("stop_reason")
                .and_then(Value::as_str)
                .map(str::to_string);
        }
    }

    /// `message_start` and a `ping`, once.
    fn start(&mut self, chat_id: Option<&str>, out: &mut Vec<u8>) {
        if self.started {
            return;
        }
        self.started = true;
        let m = json!({"type": "message_start", "message": {
            "id": message_id(chat_id), "type": "message", "role": "assistant",
            "model": self.call.model, "content": [], "stop_reason": null,
            "stop_sequence": null,
            "usage": {"input_tokens": self.prompt_tokens, "output_tokens": 0}}});
        emit(out, "message_start", &m);
        emit(out, "ping", &json!({"type": "ping"}));
    }

    fn close_block(&mut self, out: &mut Vec<u8>) {
        if self.open != Open::None {
            let d = json!({"type": "content_block_stop", "index": self.next_index - 1});
            emit(out, "content_block_stop", &d);
            self.open = Open::None;
        }
    }

    fn open_block(&mut self, kind: Open, block: Value, out: &mut Vec<u8>) {
        self.close_block(out);
        let d = json!({"type": "content_block_start", "index": self.next_index,
            "content_block": block});
        emit(out, "content_block_start", &d);
        self.next_index += 1;
        self.open = kind;
    }

    /// At `[DONE]`: the open block's stop, `message_delta` and `message_stop`.
    fn finish_message(&mut self, out: &mut Vec<u8>) {
        self.start(None, out);
        self.close_block(out);
        let (reason, sequence) =
            stop_reason(self.finish.as_deref(), self.matched.as_deref(), &self.call);
        let d = json!({"type": "message_delta",
            "delta": {"stop_reason": reason, "stop_sequence": sequence},
            "usage": usage(self.usage.as_ref())});
        emit(out, "message_delta", &d);
        emit(out, "message_stop", &json!({"type": "message_stop"}));
        self.ended = true;
    }

    fn fail(&mut self, openai: &Value, out: &mut Vec<u8>) {
        out.extend_from_slice(&error::stream_event(openai));
        self.ended = true;
    }
}

/// Where the first complete event ends: the offset of its blank line and that line's
/// length (`\n\n`, or `\r\n\r\n`).
fn event_end(buf: &[u8]) -> Option<(usize, usize)> {
    let lf = memchr::memmem::find(buf, b"\n\n").map(|i| (i, 2));
    let crlf = memchr::memmem::find(buf, b"\r\n\r\n").map(|i| (i, 4));
    match (lf, crlf) {
        (Some(a), Some(b)) => Some(if b.0 < a.0 { b } else { a }),
        (a, b) => a.or(b),
    }
}

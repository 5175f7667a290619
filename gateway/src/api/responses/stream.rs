//! A chat-completions SSE stream rendered as the Responses event stream, event by event
//! as it passes (nothing is held back): `response.created` and `response.in_progress`
//! first; the text as a `message` item (`response.output_item.added`,
//! `response.content_part.added`, `response.output_text.delta`...); each tool call as a
//! `function_call` item with its argument deltas; and at the chat's `[DONE]` every open
//! item closed, then `response.completed` (or `response.incomplete` at the token bound)
//! with the usage. Every event carries its `sequence_number`. A chat error event becomes
//! an `error` event followed by `response.failed`.

use super::output::{self, Answer, Meta};
use crate::body::lines::LineSplitter;
use serde_json::{json, Value};

/// One open tool call: its item id, output index and what has arrived of it.
#[derive(Debug)]
struct Call {
    item_id: String,
    index: usize,
    call: (String, String, String),
}

/// Translates one chat SSE stream.
pub(crate) struct StreamTranslator {
    meta: Meta,
    lines: LineSplitter,
    seq: u64,
    started: bool,
    finished: bool,
    failed: bool,
    /// The message item: its id and output index, once text arrived.
    message: Option<(String, usize)>,
    text: String,
    /// Tool calls by their chat `index`.
    calls: Vec<(u64, Call)>,
    items: usize,
    finish_reason: Option<String>,
    usage: Option<Value>,
}

impl std::fmt::Debug for StreamTranslator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StreamTranslator")
            .field("seq", &self.seq)
            .field("finished", &self.finished)
            .finish()
    }
}

impl StreamTranslator {
    /// A translator for the response `meta` describes.
    pub(crate) fn new(meta: Meta) -> Self {
        Self {
            meta,
            lines: LineSplitter::default(),
            seq: 0,
            started: false,
            finished: false,
            failed: false,
            message: None,
            text: String::new(),
            calls: Vec::new(),
            items: 0,
            finish_reason: None,
            usage: None,
        }
    }

    fn emit(&mut self, out: &mut Vec<u8>, kind: &str, mut event: Value) {
        event["type"] = Value::String(kind.to_string());
        event["sequence_number"] = self.seq.into();
        self.seq += 1;
        out.extend_from_slice(b"event: ");
        out.extend_from_slice(kind.as_bytes());
        out.extend_from_slice(b"\ndata: ");
        out.extend_from_slice(&serde_json::to_vec(&event).unwrap_or_default());
        out.extend_from_slice(b"\n\n");
    }

    fn start(&mut self, out: &mut Vec<u8>) {
        if self.started {
            return;
        }
        self.started = true;
        let r = self.meta.object("in_progress", Vec::new(), None);
        self.emit(out, "response.created", json!({"response": r}));
        let r = self.meta.object("in_progress", Vec::new(), None);
        self.emit(out, "response.in_progress", json!({"response": r}));
    }

    /// Translates one chunk of the chat stream into the events it completes.
    pub(crate) fn push(&mut self, chunk: &[u8]) -> Vec<u8> {
        let mut out = Vec::new();
        self.start(&mut out);
        for line in self.lines.push(chunk) {
            let Some(data) = line.strip_prefix(b"data:") else {
                continue;
            };
            let data = data.trim_ascii();
            if self.finished {
                continue;
            }
            if data == b"[DONE]" {
                self.complete(&mut out);
                continue;
            }
            let Ok(v) = serde_json::from_slice::<Value>(data) else {
                continue;
            };
            if v.get("error").is_some_and(|e| !e.is_null()) {
                self.fail(&mut out, &v["error"]);
                continue;
            }
            self.chunk(&mut out, &v);
        }
        out
    }

    fn chunk(&mut self, out: &mut Vec<u8>, v: &Value) {
        if let Some(u) = v.get("usage").filter(|u| u.is_object()) {
            self.usage = Some(u.clone());
        }
        let Some(choice) = v["choices"].get(0) else {
            return;
        };
        if let Some(r) = choice["finish_reason"].as_str() {
            self.finish_reason = Some(r.to_string());
        }
        let delta = &choice["delta"];
        if let Some(text) = delta["content"].as_str().filter(|t| !t.is_empty()) {
            self.text_delta(out, text);
        }
        for c in delta["tool_calls"].as_array().into_iter().flatten() {
            self.call_delta(out, c);
        }
    }

    fn text_delta(&mut self, out: &mut Vec<u8>, text: &str) {
        let (id, index) = match &self.message {
            Some(m) => m.clone(),
            None => {
                let m = (output::new_id("msg"), self.items);
                self.items += 1;
                self.message = Some(m.clone());
                let mut item = output::message_item(&m.0, "", "in_progress");
                item["content"] = json!([]);
                self.emit(
                    out,
                    "response.output_item.added",
                    json!({"output_index": m.1, "item": item}),
                );
                self.emit(
                    out,
                    "response.content_part.added",
                    json!({"item_id": m.0, "output_index": m.1, "content_index": 0,
                        "part": {"type": "output_text", "text": "", "annotations": [], "logprobs": []}}),
                );
                m
            }
        };
        self.text.push_str(text);
        self.emit(
            out,
            "response.output_text.delta",
            json!({"item_id": id, "output_index": index, "content_index": 0, "delta": text, "logprobs": []}),
        );
    }

    fn call_delta(&mut self, out: &mut Vec<u8>, c: &Value) {
        let key = c["index"].as_u64().unwrap_or(0);
        let f = &c["function"];
        if !self.calls.iter().any(|(k, _)| *k == key) {
            let call = Call {
                item_id: output::new_id("fc"),
                index: self.items,
                call: (
                    c["id"]
                        .as_str()
                        .map_or_else(|| output::new_id("call"), str::to_string),
                    f["name"].as_str().unwrap_or("").to_string(),
                    String::new(),
                ),
            };
            self.items += 1;
            let item = output::call_item(&call.item_id, &call.call, "in_progress");
            self.emit(
                out,
                "response.output_item.added",
                json!({"output_index": call.index, "item": item}),
            );
            self.calls.push((key, call));
        }
        let Some(args) = f["arguments"].as_str().filter(|a| !a.is_empty()) else {
            return;
        };
        let Some((_, call)) = self.calls.iter_mut().find(|(k, _)| *k == key) else {
            return;
        };
        call.call.2.push_str(args);
        let event = json!({"item_id": call.item_id, "output_index": call.index, "delta": args});
        self.emit(out, "response.function_call_arguments.delta", event);
    }

    /// The answer as it arrived so far.
    pub(crate) fn answer(&self) -> Answer {
        Answer {
            text: self.message.as_ref().map(|_| self.text.clone()),
            calls: self.calls.iter().map(|(_, c)| c.call.clone()).collect(),
            finish_reason: self.finish_reason.clone(),
            usage: self.usage.clone(),
        }
    }

    /// Whether the stream ended with `response.completed` (or `.incomplete`).
    pub(crate) fn completed(&self) -> bool {
        self.finished && !self.failed
    }

    fn complete(&mut self, out: &mut Vec<u8>) {
        let answer = self.answer();
        let status = if answer.truncated() {
            "incomplete"
        } else {
            "completed"
        };
        let mut items: Vec<(usize, Value)> = Vec::new();
        if let Some((id, index)) = self.message.clone() {
            let text = self.text.clone();
            let part =
                json!({"type": "output_text", "text": text, "annotations": [], "logprobs": []});
            self.emit(
                out,
                "response.output_text.done",
                json!({"item_id": id, "output_index": index, "content_index": 0, "text": text, "logprobs": []}),
            );
            self.emit(
                out,
                "response.content_part.done",
                json!({"item_id": id, "output_index": index, "content_index": 0, "part": part}),
            );
            let item = output::message_item(&id, &text, status);
            self.emit(
                out,
                "response.output_item.done",
                json!({"output_index": index, "item": item}),
            );
            items.push((index, item));
        }
        let calls: Vec<(String, usize, (String, String, String))> = self
            .calls
            .iter()
            .map(|(_, c)| (c.item_id.clone(), c.index, c.call.clone()))
            .collect();
        for (id, index, call) in calls {
            self.emit(
                out,
                "response.function_call_arguments.done",
                json!({"item_id": id, "output_index": index, "arguments": call.2}),
            );
            let item = output::call_item(&id, &call, "completed");
            self.emit(
                out,
                "response.output_item.done",
                json!({"output_index": index, "item": item}),
            );
            items.push((index, item));
        }
        items.sort_by_key(|(i, _)| *i);
        let output = items.into_iter().map(|(_, v)| v).collect();
        let r = self
            .meta
            .object(status, output, answer.usage.as_ref().map(output::usage));
        let kind = if status == "completed" {
            "response.completed"
        } else {
            "response.incomplete"
        };
        self.finished = true;
        self.emit(out, kind, json!({"response": r}));
    }

    fn fail(&mut self, out: &mut Vec<u8>, error: &Value) {
        let message = error["message"].as_str().unwrap_or("the replica failed");
        let code = error["code"].as_str().unwrap_or("server_error");
        self.emit(
            out,
            "error",
            json!({"code": code, "message": message, "param": null}),
        );
        let mut r = self.meta.object("failed", Vec::new(), None);
        r["error"] = json!({"code": "server_error", "message": message});
        self.emit(out, "response.failed", json!({"response": r}));
        self.finished = true;
        self.failed = true;
    }
}

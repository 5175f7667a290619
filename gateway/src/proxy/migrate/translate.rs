//! A `/v1/completions` continuation's stream read back as the chat stream the client was
//! getting ([`Resume::translate`]): each `choices[].text` a `chat.completion.chunk`
//! delta, the finish a chunk with `finish_reason` (and an empty delta), the usage one
//! chunk of its own with the prompt counted once and the completion across the seam (and
//! only when the client asked for usage), `[DONE]` as it comes. The `id` and `created`
//! become the first stream's further on (`super::transcript`).
//!
//! A stop string the client got the start of before the seam (an engine that does not
//! hold a partial match back) is never seen by the next engine, which only checks the
//! text it generates: the continuation's first characters are held until they show
//! whether they complete one, and if they do, the stream ends there with `stop` (the
//! rest the engine generates is dropped).

use bytes::Bytes;
use serde_json::{json, Value};

/// How a continuation's stream is read back.
#[derive(Debug)]
pub(crate) struct Resume {
    /// Completion tokens the client holds (the ids carried in the prompt).
    carried: u64,
    /// The chat prompt's tokens.
    prompt_tokens: u64,
    /// The client asked for usage (`stream_options.include_usage`).
    include_usage: bool,
    /// The request's stop strings.
    stops: Vec<String>,
    /// The end of the text the client holds, as long as the longest stop string less one.
    tail: String,
    /// Continuation text not sent yet: whether it completes a stop string is open.
    held: String,
    /// Whether a stop string across the seam is ruled out (or none can be).
    decided: bool,
    /// The stream ended at a stop string across the seam: the rest is dropped.
    done: bool,
    /// Continuation chunks with text (its tokens, as far as the gateway can count).
    generated: u64,
    /// The start of an event whose end has not arrived.
    pending: Vec<u8>,
    /// The last chunk's `id`, `created` and `model`, for the chunks made here.
    meta: [Value; 3],
}

impl Resume {
    /// The reader of a continuation after the client got `sent`, carrying `carried` ids.
    pub(crate) fn new(
        sent: &str,
        stops: Vec<String>,
        include_usage: bool,
        carried: u64,
        prompt_tokens: u64,
    ) -> Self {
        let stops: Vec<String> = stops.into_iter().filter(|s| !s.is_empty()).collect();
        let keep = stops.iter().map(String::len).max().unwrap_or(1) - 1;
        let mut from = sent.len().saturating_sub(keep);
        while !sent.is_char_boundary(from) {
            from += 1;
        }
        let tail = sent[from..].to_string();
        // Only a tail that ends with the start of a stop string can be completed.
        let open = stops
            .iter()
            .any(|s| (1..s.len()).any(|k| s.is_char_boundary(k) && tail.ends_with(&s[..k])));
        Self {
            carried,
            prompt_tokens,
            include_usage,
            decided: !open,
            stops,
            tail,
            held: String::new(),
            done: false,
            generated: 0,
            pending: Vec::new(),
            meta: [Value::Null, Value::Null, Value::Null],
        }
    }

    /// Reads one body chunk of the continuation; returns the chat events it makes (whole
    /// events only).
    pub(crate) fn translate(&mut self, chunk: &Bytes) -> Bytes {
        self.pending.extend_from_slice(chunk);
        let mut out = Vec::with_capacity(self.pending.len() + 64);
        let mut at = 0;
        while let Some(len) = self.pending[at..]
            .windows(2)
            .position(|w| w == b"\n\n")
            .map(|p| p + 2)
        {
            let event = self.pending[at..at + len - 2].to_vec();
            at += len;
            for line in event.split(|&b| b == b'\n') {
                if let Some(data) = line.strip_prefix(b"data:") {
                    self.data(data.trim_ascii(), &mut out);
                }
            }
        }
        self.pending.drain(..at);
        Bytes::from(out)
    }

    /// One event's data.
    fn data(&mut self, data: &[u8], out: &mut Vec<u8>) {
        if self.done {
            return;
        }
        if data == b"[DONE]" {
            self.settle(true, out);
            if !self.done {
                out.extend_from_slice(b"data: [DONE]\n\n");
            }
            return;
        }
        let v = match serde_json::from_slice::<Value>(data) {
            Ok(v) if v.get("error").is_none() => v,
            // An error event (or what cannot be read) goes on as it came: the transcript
            // holds an error back, and the stream may continue once more.
            _ => {
                event(out, data);
                return;
            }
        };
        for (i, k) in ["id", "created", "model"].into_iter().enumerate() {
            if let Some(x) = v.get(k) {
                self.meta[i] = x.clone();
            }
        }
        let choice = v.get("choices").and_then(|c| c.get(0));
        let text = choice.and_then(|c| c.get("text")).and_then(Value::as_str);
        if let Some(t) = text.filter(|t| !t.is_empty()) {
            self.generated += 1;
            if self.decided {
                self.chunk(out, json!({"content": t}), Value::Null);
            } else {
                self.held.push_str(t);
                self.settle(false, out);
                if self.done {
                    return;
                }
                if self.decided && !self.held.is_empty() {
                    let held = std::mem::take(&mut self.held);
                    self.chunk(out, json!({"content": held}), Value::Null);
                }
            }
        }
        let finish = choice
            .and_then(|c| c.get("finish_reason"))
            .filter(|f| !f.is_null());
        if let Some(f) = finish {
            self.settle(true, out);
            if self.done {
                return;
            }
            if !self.held.is_empty() {
                let held = std::mem::take(&mut self.held);
                self.chunk(out, json!({"content": held}), Value::Null);
            }
            self.chunk(out, json!({}), f.clone());
        }
        if let Some(u) = v.get("usage").filter(|u| u.is_object()) {
            if self.include_usage {
                let usage = self.usage(u);
                self.usage_chunk(out, usage);
            }
        }
    }

    /// Whether the continuation's text held completes a stop string the client holds the
    /// start of: if it does, ends the stream (finish `stop`, usage, `[DONE]`); if it does
    /// not and is long enough to (or `last`), the text may go out.
    fn settle(&mut self, last: bool, out: &mut Vec<u8>) {
        if self.decided {
            return;
        }
        if !stop_across(&self.tail, &self.held, &self.stops) {
            let longest = self.stops.iter().map(String::len).max().unwrap_or(0);
            self.decided = last || self.held.len() + 1 >= longest;
            return;
        }
        self.decided = true;
        self.done = true;
        self.held.clear();
        self.chunk(out, json!({}), json!("stop"));
        if self.include_usage {
            let usage = json!({
                "prompt_tokens": self.prompt_tokens,
                "completion_tokens": self.carried + self.generated,
                "total_tokens": self.prompt_tokens + self.carried + self.generated,
            });
            self.usage_chunk(out, usage);
        }
        out.extend_from_slice(b"data: [DONE]\n\n");
    }

    /// The continuation's usage as the client's: its prompt less the ids carried, its
    /// completion plus them.
    fn usage(&self, u: &Value) -> Value {
        let mut u = u.clone();
        let read = |k: &str| u.get(k).and_then(Value::as_u64).unwrap_or(0);
        let prompt = read("prompt_tokens").saturating_sub(self.carried);
        let completion = read("completion_tokens") + self.carried;
        if let Some(o) = u.as_object_mut() {
            o.insert("prompt_tokens".into(), json!(prompt));
            o.insert("completion_tokens".into(), json!(completion));
            o.insert("total_tokens".into(), json!(prompt + completion));
            if let Some(c) = o
                .get_mut("prompt_tokens_details")
                .and_then(|d| d.get_mut("cached_tokens"))
            {
                if let Some(n) = c.as_u64() {
                    *c = json!(n.min(prompt));
                }
            }
        }
        u
    }

    /// Appends one chat chunk with `delta` and `finish`.
    fn chunk(&self, out: &mut Vec<u8>, delta: Value, finish: Value) {
        let choices = json!([{"index": 0, "delta": delta, "finish_reason": finish}]);
        self.emit(out, choices, None);
    }

    /// Appends the usage chunk (no choices).
    fn usage_chunk(&self, out: &mut Vec<u8>, usage: Value) {
        self.emit(out, json!([]), Some(usage));
    }

    fn emit(&self, out: &mut Vec<u8>, choices: Value, usage: Option<Value>) {
        let [id, created, model] = &self.meta;
        let mut c = json!({
            "id": id,
            "object": "chat.completion.chunk",
            "created": created,
            "model": model,
            "choices": choices,
        });
        if let (Some(u), Some(o)) = (usage, c.as_object_mut()) {
            o.insert("usage".into(), u);
        }
        event(out, &serde_json::to_vec(&c).unwrap_or_default());
    }
}

fn event(out: &mut Vec<u8>, data: &[u8]) {
    out.extend_from_slice(b"data: ");
    out.extend_from_slice(data);
    out.extend_from_slice(b"\n\n");
}

/// Whether a stop string starts in `tail` (text the client holds) and ends in `held`
/// (text after the seam).
pub(crate) fn stop_across(tail: &str, held: &str, stops: &[String]) -> bool {
    let text = format!("{tail}{held}");
    stops.iter().any(|s| {
        (0..tail.len()).any(|p| {
            tail.is_char_boundary(p) && p + s.len() > tail.len() && text[p..].starts_with(s)
        })
    })
}

//! A chat stream's continuation on an engine that takes a prompt of token ids on
//! `/v1/completions` (vLLM, SGLang, llama.cpp's server; `token_prompts` for a pool of
//! another OpenAI-compatible server): its events carry no token ids, so the gateway
//! rebuilds what the client holds from the text it sent. The next server gets the chat's
//! prompt as the pool's tokenizer renders it (the ids it was routed by), then the ids of
//! the text the client holds (re-tokenized with the same tokenizer), `max_tokens` less the
//! tokens carried, and the chat's stop strings and sampling fields; its stream comes back
//! as chat chunks ([`super::translate::Resume`]).
//!
//! Exact where the tokenizer splits the text as the engine generated it (byte-level BPE
//! does not promise that at every seam) and the engine computes the same logits for the
//! prompt prefilled at once as it did decoding token by token (`docs/engines.md`).

use super::state::Migration;
use super::translate::Resume;
use crate::body::request::{self, Endpoint};
use crate::replicas::Replica;
use crate::state::AppState;
use bytes::Bytes;
use serde_json::{json, Map, Value};

/// Chat-only members a completion request does not take (or that the continuation replaces).
const CHAT_ONLY: [&str; 16] = [
    "messages",
    "tools",
    "tool_choice",
    "parallel_tool_calls",
    "functions",
    "function_call",
    "response_format",
    "logprobs",
    "top_logprobs",
    "max_completion_tokens",
    "chat_template",
    "chat_template_kwargs",
    "add_generation_prompt",
    "continue_final_message",
    "documents",
    "stream_options",
];

/// Whether replica `r`'s server takes a token-id prompt: its pool's `token_prompts`, else
/// its engine's default. A Warmpath replica continues by its own field, never this way.
pub(crate) fn takes_token_prompts(state: &AppState, r: &Replica) -> bool {
    let Some(pool) = &r.upstream.pool else {
        return false;
    };
    state
        .config()
        .pools
        .iter()
        .find(|p| &p.name == pool)
        .map_or(r.upstream.engine.takes_token_prompts(), |p| {
            p.takes_token_prompts()
        })
}

/// The continuation of `m`, whose server `r` failed: the `/v1/completions` body, how to
/// read its stream, and the number of ids carried; else why there is none (the reason
/// logged with the refusal).
pub(crate) fn prepare(
    state: &AppState,
    r: &Replica,
    m: &Migration,
    prompt_tokens: u64,
) -> Result<(Bytes, Resume, usize), &'static str> {
    if !takes_token_prompts(state, r) {
        return Err("no_token_prompts");
    }
    if !r.tokenizer.counts_tokens() {
        // Text units are no engine's tokens: nothing to send as a prompt.
        return Err("text_units");
    }
    if m.transcript.not_text {
        return Err("not_text");
    }
    let parsed = request::parse(Endpoint::Chat, m.body()).map_err(|_| "unreadable")?;
    let mut ids: Vec<u32> = super::super::tokens::tokenize_in_place(r, &parsed)
        .map_err(|_| "unreadable")?
        .into_iter()
        .map(|t| t.0)
        .collect();
    let sent = r
        .tokenizer
        .encode(&m.transcript.text, false)
        .map_err(|_| "unreadable")?;
    let carried = sent.len();
    ids.extend(sent.iter().map(|t| t.0));
    let (body, stops, include_usage) = completion_body(m.body(), ids, carried as u64)?;
    let resume = Resume::new(
        &m.transcript.text,
        stops,
        include_usage,
        carried as u64,
        prompt_tokens,
    );
    Ok((body, resume, carried))
}

/// The `/v1/completions` body continuing chat `body` from `prompt` (the chat's ids, then
/// the `carried` ids of the text sent): the chat's own members but the chat-only ones,
/// `max_tokens` less `carried`, streamed with usage. Also its stop strings and whether the
/// client asked for usage. Refused for what a completion cannot reproduce: several
/// choices, log probabilities, tools, a response format.
pub(crate) fn completion_body(
    body: &[u8],
    prompt: Vec<u32>,
    carried: u64,
) -> Result<(Bytes, Vec<String>, bool), &'static str> {
    let Ok(Value::Object(mut obj)) = serde_json::from_slice::<Value>(body) else {
        return Err("unreadable");
    };
    if obj.get("n").and_then(Value::as_u64).is_some_and(|n| n > 1)
        || obj.get("logprobs").and_then(Value::as_bool) == Some(true)
        || obj
            .get("tools")
            .and_then(Value::as_array)
            .is_some_and(|t| !t.is_empty())
        || obj
            .get("response_format")
            .and_then(|f| f.get("type"))
            .is_some_and(|t| t != "text")
    {
        return Err("unsupported_request");
    }
    let max = ["max_completion_tokens", "max_tokens"]
        .iter()
        .find_map(|k| obj.get(*k).and_then(Value::as_u64));
    let include_usage = obj
        .get("stream_options")
        .and_then(|o| o.get("include_usage"))
        .and_then(Value::as_bool)
        == Some(true);
    let stops = match obj.get("stop") {
        Some(Value::String(s)) => vec![s.clone()],
        Some(Value::Array(a)) => a
            .iter()
            .filter_map(|s| s.as_str().map(str::to_string))
            .collect(),
        _ => Vec::new(),
    };
    for k in CHAT_ONLY {
        obj.remove(k);
    }
    obj.remove("max_tokens");
    let mut out = Map::with_capacity(obj.len() + 4);
    if let Some(model) = obj.remove("model") {
        out.insert("model".into(), model);
    }
    out.insert("prompt".into(), json!(prompt));
    if let Some(max) = max {
        let left = max.saturating_sub(carried);
        if left == 0 {
            // Every token the request allowed is out; only its end is missing.
            return Err("length");
        }
        out.insert("max_tokens".into(), json!(left));
    }
    out.extend(obj);
    out.insert("stream".into(), Value::Bool(true));
    out.insert("stream_options".into(), json!({"include_usage": true}));
    let bytes = serde_json::to_vec(&Value::Object(out)).map_err(|_| "unreadable")?;
    Ok((Bytes::from(bytes), stops, include_usage))
}

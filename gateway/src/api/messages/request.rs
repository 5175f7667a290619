//! The Messages request as a chat-completions body: `system` becomes the system message,
//! text blocks the message's text, `tool_use` blocks an assistant's `tool_calls`,
//! `tool_result` blocks `tool` messages, `tools` function tools, and the sampling fields
//! their chat names. A message of one text block is sent as a string, as a chat client
//! would, so the same conversation hashes to the same blocks either way.

use crate::error::GatewayError;
use serde::Deserialize;
use serde_json::{json, Map, Value};

/// What the client asked for that the answer's translation needs.
#[derive(Clone, Debug, Default, PartialEq)]
pub(crate) struct Call {
    /// The model, as asked for.
    pub model: String,
    /// `stream: true`.
    pub stream: bool,
    /// `stop_sequences` (to tell `stop_sequence` from `end_turn`).
    pub stop_sequences: Vec<String>,
}

/// The fields read; any other (`metadata`, `service_tier`, ...) is accepted and not
/// forwarded.
#[derive(Deserialize)]
struct Request {
    model: String,
    max_tokens: u32,
    messages: Vec<InMessage>,
    #[serde(default)]
    system: Option<Content>,
    #[serde(default)]
    tools: Option<Vec<Tool>>,
    #[serde(default)]
    tool_choice: Option<ToolChoice>,
    #[serde(default)]
    stop_sequences: Option<Vec<String>>,
    #[serde(default)]
    temperature: Option<f64>,
    #[serde(default)]
    top_p: Option<f64>,
    #[serde(default)]
    top_k: Option<u32>,
    #[serde(default)]
    stream: Option<bool>,
}

#[derive(Deserialize)]
struct InMessage {
    role: String,
    content: Content,
}

/// A string, or a list of content blocks.
#[derive(Deserialize)]
#[serde(untagged)]
enum Content {
    Text(String),
    Blocks(Vec<Value>),
}

/// One content block (read from a `Value` so an unknown `type` can be named in the 400).
#[derive(Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum Block {
    Text {
        text: String,
    },
    ToolUse {
        id: String,
        name: String,
        input: Value,
    },
    ToolResult {
        tool_use_id: String,
        #[serde(default)]
        content: Option<Content>,
    },
}

#[derive(Deserialize)]
struct Tool {
    name: String,
    #[serde(default)]
    description: Option<String>,
    input_schema: Value,
}

#[derive(Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum ToolChoice {
    Auto,
    Any,
    None,
    Tool { name: String },
}

fn bad(msg: impl Into<String>) -> GatewayError {
    GatewayError::BadRequest(msg.into())
}

/// The chat-completions body for a Messages request, and what its answer's translation
/// needs. A body that is not a valid Messages request is a 400 naming what is wrong.
pub(crate) fn to_chat(body: &[u8]) -> Result<(Vec<u8>, Call), GatewayError> {
    let req: Request = serde_json::from_slice(body)
        .map_err(|e| GatewayError::InvalidBody(format!("not a Messages request: {e}")))?;
    if req.model.is_empty() {
        return Err(bad("`model` must not be empty"));
    }
    if req.max_tokens == 0 {
        return Err(bad("`max_tokens` must be at least 1"));
    }
    if req.messages.is_empty() {
        return Err(bad("`messages` must not be empty"));
    }
    let mut messages = Vec::with_capacity(req.messages.len() + 1);
    if let Some(system) = req.system {
        let parts = texts(system, "system")?;
        messages.push(json!({"role": "system", "content": text_content(parts)}));
    }
    for (i, m) in req.messages.into_iter().enumerate() {
        match m.role.as_str() {
            "user" => user(m.content, i, &mut messages)?,
            "assistant" => messages.push(assistant(m.content, i)?),
            other => {
                return Err(bad(format!(
                    "messages[{i}].role: `{other}` is not `user` or `assistant` (put system text in `system`)"
                )))
            }
        }
    }
    let mut chat = Map::new();
    chat.insert("model".into(), json!(req.model));
    chat.insert("messages".into(), Value::Array(messages));
    chat.insert("max_tokens".into(), json!(req.max_tokens));
    let stream = req.stream.unwrap_or(false);
    if stream {
        chat.insert("stream".into(), json!(true));
        chat.insert("stream_options".into(), json!({"include_usage": true}));
    }
    for (name, v) in [("temperature", req.temperature), ("top_p", req.top_p)] {
        if let Some(v) = v {
            chat.insert(name.into(), json!(v));
        }
    }
    if let Some(k) = req.top_k {
        chat.insert("top_k".into(), json!(k));
    }
    let stop_sequences = req.stop_sequences.unwrap_or_default();
    if !stop_sequences.is_empty() {
        chat.insert("stop".into(), json!(stop_sequences));
    }
    if let Some(tools) = req.tools.filter(|t| !t.is_empty()) {
        let tools: Vec<Value> = tools
            .into_iter()
            .map(|t| {
                let mut f = Map::new();
                f.insert("name".into(), json!(t.name));
                if let Some(d) = t.description {
                    f.insert("description".into(), json!(d));
                }
                f.insert("parameters".into(), t.input_schema);
                json!({"type": "function", "function": f})
            })
            .collect();
        chat.insert("tools".into(), Value::Array(tools));
    }
    if let Some(choice) = req.tool_choice {
        let c = match choice {
            ToolChoice::Auto => json!("auto"),
            ToolChoice::Any => json!("required"),
            ToolChoice::None => json!("none"),
            ToolChoice::Tool { name } => json!({"type": "function", "function": {"name": name}}),
        };
        chat.insert("tool_choice".into(), c);
    }
    let call = Call {
        model: req.model,
        stream,
        stop_sequences,
    };
    let body = serde_json::to_vec(&Value::Object(chat)).map_err(|e| bad(e.to_string()))?;
    Ok((body, call))
}

/// One block, read; images and other kinds are refused by name.
fn block(v: Value, at: &str) -> Result<Block, GatewayError> {
    let kind = v
        .get("type")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_string();
    if kind == "image" || kind == "document" {
        return Err(bad(format!(
            "{at}: `{kind}` content blocks are not supported; send text"
        )));
    }
    serde_json::from_value(v).map_err(|e| bad(format!("{at}: invalid `{kind}` block: {e}")))
}

/// The text blocks of `content` (a string is one); any other block is a 400.
fn texts(content: Content, at: &str) -> Result<Vec<String>, GatewayError> {
    match content {
        Content::Text(s) => Ok(vec![s]),
        Content::Blocks(blocks) => {
            let mut out = Vec::with_capacity(blocks.len());
            for (j, b) in blocks.into_iter().enumerate() {
                match block(b, &format!("{at}[{j}]"))? {
                    Block::Text { text } => out.push(text),
                    _ => return Err(bad(format!("{at}[{j}]: only text blocks belong here"))),
                }
            }
            Ok(out)
        }
    }
}

/// One text (or none) as a string; several as chat text parts (the engine joins them).
fn text_content(mut parts: Vec<String>) -> Value {
    if parts.len() <= 1 {
        return json!(parts.pop().unwrap_or_default());
    }
    Value::Array(
        parts
            .into_iter()
            .map(|t| json!({"type": "text", "text": t}))
            .collect(),
    )
}

/// A user message: its `tool_result` blocks become `tool` messages, its text the user's
/// message (text after a tool result starts a new one, keeping the order).
fn user(content: Content, i: usize, out: &mut Vec<Value>) -> Result<(), GatewayError> {
    let blocks = match content {
        Content::Text(s) => {
            out.push(json!({"role": "user", "content": s}));
            return Ok(());
        }
        Content::Blocks(b) => b,
    };
    let mut text = Vec::new();
    let flush = |text: &mut Vec<String>, out: &mut Vec<Value>| {
        if !text.is_empty() {
            let parts = std::mem::take(text);
            out.push(json!({"role": "user", "content": text_content(parts)}));
        }
    };
    for (j, b) in blocks.into_iter().enumerate() {
        let at = format!("messages[{i}].content[{j}]");
        match block(b, &at)? {
            Block::Text { text: t } => text.push(t),
            Block::ToolResult {
                tool_use_id,
                content,
            } => {
                flush(&mut text, out);
                let result = match content {
                    None => String::new(),
                    Some(c) => texts(c, &format!("{at}.content"))?.concat(),
                };
                out.push(json!({"role": "tool", "tool_call_id": tool_use_id, "content": result}));
            }
            Block::ToolUse { .. } => {
                return Err(bad(format!(
                    "{at}: `tool_use` blocks belong to the assistant"
                )))
            }
        }
    }
    flush(&mut text, out);
    Ok(())
}

/// An assistant message: text blocks its content, `tool_use` blocks its `tool_calls`.
fn assistant(content: Content, i: usize) -> Result<Value, GatewayError> {
    let blocks = match content {
        Content::Text(s) => return Ok(json!({"role": "assistant", "content": s})),
        Content::Blocks(b) => b,
    };
    let (mut text, mut calls) = (Vec::new(), Vec::new());
    for (j, b) in blocks.into_iter().enumerate() {
        let at = format!("messages[{i}].content[{j}]");
        match block(b, &at)? {
            Block::Text { text: t } => text.push(t),
            Block::ToolUse { id, name, input } => {
                let arguments = serde_json::to_string(&input).map_err(|e| bad(e.to_string()))?;
                calls.push(json!({"id": id, "type": "function",
                    "function": {"name": name, "arguments": arguments}}));
            }
            Block::ToolResult { .. } => {
                return Err(bad(format!(
                    "{at}: `tool_result` blocks belong to the user"
                )))
            }
        }
    }
    let mut m = Map::new();
    m.insert("role".into(), json!("assistant"));
    let content = match text.len() {
        0 if !calls.is_empty() => Value::Null,
        _ => text_content(text),
    };
    m.insert("content".into(), content);
    if !calls.is_empty() {
        m.insert("tool_calls".into(), Value::Array(calls));
    }
    Ok(Value::Object(m))
}

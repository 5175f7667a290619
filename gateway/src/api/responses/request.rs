//! A Responses request read and rendered as the chat-completions body a replica serves:
//! `instructions` become the system message, input items become chat messages (a
//! `function_call` joins the assistant message before it as a tool call, a
//! `function_call_output` is a `tool` message), function tools become chat tools. The
//! chat body then takes the gateway's chat path (tokenization, block hashes, limits,
//! routing) unchanged, so a Responses request routes exactly like its chat equivalent.

use crate::error::GatewayError;
use serde_json::{json, Map, Value};

fn bad(msg: impl Into<String>) -> GatewayError {
    GatewayError::BadRequest(msg.into())
}

/// What a Responses request asks for, beyond the chat body it becomes.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct ResponsesRequest {
    /// Model name.
    pub model: String,
    /// `instructions`, when given (never carried over to a follow-up).
    pub instructions: Option<String>,
    /// The new input, as chat messages (no system message from `instructions`).
    pub input: Vec<Value>,
    /// The previous response this one continues.
    pub previous_response_id: Option<String>,
    /// Whether the response is kept for a follow-up (`store`, default true).
    pub store: bool,
    /// SSE requested.
    pub stream: bool,
    /// The fields echoed back on the response object, as the client sent them.
    pub echo: Echo,
    /// Chat fields the body carries over (`max_tokens`, `temperature`, `tools`, ...).
    chat_fields: Map<String, Value>,
}

/// Request fields the response object repeats.
#[derive(Debug, Clone, PartialEq, Default)]
pub(crate) struct Echo {
    /// `tools`, in the Responses shape.
    pub tools: Value,
    /// `tool_choice`, in the Responses shape.
    pub tool_choice: Value,
    /// `temperature`.
    pub temperature: Value,
    /// `top_p`.
    pub top_p: Value,
    /// `max_output_tokens`.
    pub max_output_tokens: Value,
    /// `metadata`.
    pub metadata: Value,
    /// `parallel_tool_calls` (default true).
    pub parallel_tool_calls: bool,
}

impl ResponsesRequest {
    /// Reads a `POST /v1/responses` body. A missing model, an input that is neither a
    /// string nor a list of items, or an item or tool the gateway cannot render is a 400
    /// naming the field.
    pub(crate) fn parse(body: &[u8]) -> Result<Self, GatewayError> {
        let v: Value = serde_json::from_slice(body)
            .map_err(|e| GatewayError::InvalidBody(format!("not JSON: {e}")))?;
        let Value::Object(mut o) = v else {
            return Err(GatewayError::InvalidBody(
                "the body must be a JSON object".into(),
            ));
        };
        let model = match o.remove("model") {
            Some(Value::String(m)) if !m.is_empty() => m,
            Some(Value::String(_)) | None | Some(Value::Null) => {
                return Err(bad("`model` is required"))
            }
            Some(_) => return Err(bad("`model` must be a string")),
        };
        let instructions = match o.remove("instructions") {
            None | Some(Value::Null) => None,
            Some(Value::String(s)) => Some(s),
            Some(_) => return Err(bad("`instructions` must be a string")),
        };
        let input = match o.remove("input") {
            Some(Value::String(s)) => vec![json!({"role": "user", "content": s})],
            Some(Value::Array(items)) => items_to_messages(&items)?,
            None | Some(Value::Null) => return Err(bad("`input` is required")),
            Some(_) => return Err(bad("`input` must be a string or a list of input items")),
        };
        let previous_response_id = match o.remove("previous_response_id") {
            None | Some(Value::Null) => None,
            Some(Value::String(s)) if !s.is_empty() => Some(s),
            Some(_) => return Err(bad("`previous_response_id` must be a response id")),
        };
        let flag = |o: &mut Map<String, Value>, name: &str, default: bool| match o.remove(name) {
            None | Some(Value::Null) => Ok(default),
            Some(Value::Bool(b)) => Ok(b),
            Some(_) => Err(bad(format!("`{name}` must be a boolean"))),
        };
        let store = flag(&mut o, "store", true)?;
        let stream = flag(&mut o, "stream", false)?;
        let parallel_tool_calls = flag(&mut o, "parallel_tool_calls", true)?;
        let mut chat_fields = Map::new();
        let mut echo = Echo {
            parallel_tool_calls,
            tool_choice: json!("auto"),
            tools: json!([]),
            ..Echo::default()
        };
        for (name, chat_name) in [
            ("temperature", "temperature"),
            ("top_p", "top_p"),
            ("max_output_tokens", "max_tokens"),
        ] {
            match o.remove(name) {
                None | Some(Value::Null) => {}
                Some(n @ Value::Number(_)) => {
                    chat_fields.insert(chat_name.into(), n.clone());
                    match name {
                        "temperature" => echo.temperature = n,
                        "top_p" => echo.top_p = n,
                        _ => echo.max_output_tokens = n,
                    }
                }
                Some(_) => return Err(bad(format!("`{name}` must be a number"))),
            }
        }
        if let Some(m @ Value::Object(_)) = o.remove("metadata") {
            echo.metadata = m;
        }
        match o.remove("tools") {
            None | Some(Value::Null) => {}
            Some(Value::Array(tools)) if tools.is_empty() => {}
            Some(Value::Array(tools)) => {
                let chat: Vec<Value> = tools.iter().map(tool_to_chat).collect::<Result<_, _>>()?;
                chat_fields.insert("tools".into(), Value::Array(chat));
                chat_fields.insert("parallel_tool_calls".into(), parallel_tool_calls.into());
                echo.tools = Value::Array(tools);
            }
            Some(_) => return Err(bad("`tools` must be a list")),
        }
        match o.remove("tool_choice") {
            None | Some(Value::Null) => {}
            Some(Value::String(s)) if matches!(s.as_str(), "auto" | "none" | "required") => {
                chat_fields.insert("tool_choice".into(), Value::String(s.clone()));
                echo.tool_choice = Value::String(s);
            }
            Some(c @ Value::Object(_)) if c["type"] == "function" && c["name"].is_string() => {
                chat_fields.insert(
                    "tool_choice".into(),
                    json!({"type": "function", "function": {"name": c["name"]}}),
                );
                echo.tool_choice = c;
            }
            Some(_) => {
                return Err(bad(
                    "`tool_choice` must be auto, none, required or a function",
                ))
            }
        }
        Ok(Self {
            model,
            instructions,
            input,
            previous_response_id,
            store,
            stream,
            echo,
            chat_fields,
        })
    }

    /// The chat-completions body for `history` (the earlier turns, when continuing a
    /// response) followed by this request's input, with `instructions` as the system
    /// message in front.
    pub(crate) fn chat_body(&self, history: &[Value]) -> Vec<u8> {
        let mut messages = Vec::with_capacity(1 + history.len() + self.input.len());
        if let Some(i) = &self.instructions {
            messages.push(json!({"role": "system", "content": i}));
        }
        messages.extend(history.iter().cloned());
        messages.extend(self.input.iter().cloned());
        let mut body = Map::new();
        body.insert("model".into(), Value::String(self.model.clone()));
        body.insert("messages".into(), Value::Array(messages));
        for (k, v) in &self.chat_fields {
            body.insert(k.clone(), v.clone());
        }
        if self.stream {
            body.insert("stream".into(), Value::Bool(true));
            body.insert("stream_options".into(), json!({"include_usage": true}));
        }
        serde_json::to_vec(&Value::Object(body)).unwrap_or_default()
    }
}

/// A function tool in the chat shape; any other tool type is refused.
fn tool_to_chat(tool: &Value) -> Result<Value, GatewayError> {
    if tool["type"] != "function" || !tool["name"].is_string() {
        return Err(bad(
            "`tools`: only function tools (`{\"type\":\"function\",\"name\":...}`) are supported",
        ));
    }
    let mut f = Map::new();
    f.insert("name".into(), tool["name"].clone());
    for k in ["description", "parameters", "strict"] {
        if !tool[k].is_null() {
            f.insert(k.into(), tool[k].clone());
        }
    }
    Ok(json!({"type": "function", "function": f}))
}

/// The text of a message's content: a string, or its text parts joined.
fn content_text(content: &Value) -> Result<String, GatewayError> {
    match content {
        Value::String(s) => Ok(s.clone()),
        Value::Array(parts) => {
            let mut out = String::new();
            for p in parts {
                match (p["type"].as_str(), p["text"].as_str()) {
                    (Some("input_text" | "output_text" | "text"), Some(t)) => out.push_str(t),
                    (Some(t), _) => {
                        return Err(bad(format!(
                            "`input`: content parts of type `{t}` are not supported (text only)"
                        )))
                    }
                    _ => return Err(bad("`input`: a content part needs a type and text")),
                }
            }
            Ok(out)
        }
        _ => Err(bad(
            "`input`: a message's content must be a string or a list of parts",
        )),
    }
}

/// Input items as chat messages, in order. Consecutive `function_call` items join the
/// assistant message before them (as a chat response holds its text and tool calls).
pub(crate) fn items_to_messages(items: &[Value]) -> Result<Vec<Value>, GatewayError> {
    let mut out: Vec<Value> = Vec::with_capacity(items.len());
    for item in items {
        if !item.is_object() {
            return Err(bad("`input`: each item must be an object"));
        }
        match item["type"].as_str() {
            None | Some("message") => {
                let role = match item["role"].as_str() {
                    Some("developer") => "system",
                    Some(r @ ("user" | "system" | "assistant")) => r,
                    _ => return Err(bad(
                        "`input`: a message's role must be user, assistant, system or developer",
                    )),
                };
                let text = content_text(&item["content"])?;
                out.push(json!({"role": role, "content": text}));
            }
            Some("function_call") => {
                let (Some(call_id), Some(name)) = (item["call_id"].as_str(), item["name"].as_str())
                else {
                    return Err(bad("`input`: a function_call needs call_id and name"));
                };
                let call = json!({
                    "id": call_id,
                    "type": "function",
                    "function": {"name": name, "arguments": item["arguments"].as_str().unwrap_or("{}")},
                });
                match out.last_mut() {
                    Some(m) if m["role"] == "assistant" => {
                        if m.get("tool_calls").is_none() {
                            m["tool_calls"] = json!([]);
                        }
                        if let Some(calls) = m["tool_calls"].as_array_mut() {
                            calls.push(call);
                        }
                    }
                    _ => out
                        .push(json!({"role": "assistant", "content": null, "tool_calls": [call]})),
                }
            }
            Some("function_call_output") => {
                let Some(call_id) = item["call_id"].as_str() else {
                    return Err(bad("`input`: a function_call_output needs call_id"));
                };
                let output = match &item["output"] {
                    Value::String(s) => s.clone(),
                    parts @ Value::Array(_) => content_text(parts)?,
                    _ => return Err(bad("`input`: a function_call_output needs output")),
                };
                out.push(json!({"role": "tool", "tool_call_id": call_id, "content": output}));
            }
            // Reasoning items carry nothing a chat template renders.
            Some("reasoning") => {}
            Some(t) => {
                return Err(bad(format!(
                    "`input`: items of type `{t}` are not supported"
                )))
            }
        }
    }
    Ok(out)
}

//! [`ChatInput`]: everything of a chat request the chat template reads, prepared the way
//! vLLM prepares it before calling Hugging Face `apply_chat_template`, so that the prompt
//! (and so every block hash) is the engine's.
//!
//! What the template gets (vLLM `entrypoints/chat_utils.py` and `serving_chat.py`):
//! - `messages`: each reduced to `role`, `content` (a string: text parts joined with `\n`,
//!   `null` as `""`), then `tool_calls` (assistant; an empty list dropped; each call's
//!   `arguments` parsed from its JSON string into an object, `{}` when empty, not JSON or
//!   not an object) or `tool_call_id` (tool), then `name`, `reasoning_content`,
//!   `reasoning`; other keys are dropped.
//! - `tools`: as pydantic dumps the request's tools: `type`, then `function` with `name`,
//!   `description` and `parameters` (`null` when absent), then any other keys as sent.
//! - `documents`, `add_generation_prompt`, `continue_final_message`, and the request's
//!   `chat_template_kwargs` on top. `tool_choice` is checked but not passed (vLLM does not).
//!
//! Values keep the JSON's key order (as Python dicts do), which `tojson` writes out.

use crate::message::ChatMessage;
use minijinja::Value;
use serde::Deserialize;

/// Why a request's chat fields cannot be rendered: a client error (HTTP 400).
#[derive(Debug, thiserror::Error)]
#[error("`{param}` {problem}")]
pub struct ChatInputError {
    /// The field, as the client wrote it (`tools`, `messages`, ...).
    pub param: &'static str,
    /// What is wrong with it.
    pub problem: String,
}

fn err<T>(param: &'static str, problem: impl Into<String>) -> Result<T, ChatInputError> {
    Err(ChatInputError {
        param,
        problem: problem.into(),
    })
}

/// The template's input for one chat request.
#[derive(Clone, Debug, PartialEq)]
pub struct ChatInput {
    pub(crate) messages: Vec<Value>,
    pub(crate) tools: Option<Value>,
    pub(crate) documents: Option<Value>,
    pub(crate) add_generation_prompt: bool,
    pub(crate) continue_final_message: bool,
    /// `chat_template_kwargs`, in order.
    pub(crate) kwargs: Vec<(String, Value)>,
}

/// Top-level request fields that select the full rendering (see [`ChatInput::needed`]).
pub const RENDER_FIELDS: [&str; 6] = [
    "tools",
    "tool_choice",
    "documents",
    "chat_template_kwargs",
    "add_generation_prompt",
    "continue_final_message",
];

/// `chat_template_kwargs` keys that would replace what the request itself sets.
const RESERVED_KWARGS: [&str; 6] = [
    "messages",
    "tools",
    "documents",
    "add_generation_prompt",
    "continue_final_message",
    "chat_template",
];

#[derive(Deserialize)]
struct Body {
    #[serde(default)]
    messages: Vec<Value>,
    #[serde(default)]
    tools: Option<Value>,
    #[serde(default)]
    tool_choice: Option<Value>,
    #[serde(default)]
    documents: Option<Value>,
    #[serde(default)]
    chat_template_kwargs: Option<Value>,
    #[serde(default)]
    add_generation_prompt: Option<Value>,
    #[serde(default)]
    continue_final_message: Option<Value>,
}

impl ChatInput {
    /// Plain role/content messages, with the generation prompt.
    pub fn from_messages(messages: &[ChatMessage]) -> Self {
        let messages = messages
            .iter()
            .map(|m| {
                Value::from_iter([
                    ("role", Value::from(m.role.as_str())),
                    ("content", Value::from(m.content.as_str())),
                ])
            })
            .collect();
        Self {
            messages,
            tools: None,
            documents: None,
            add_generation_prompt: true,
            continue_final_message: false,
            kwargs: Vec::new(),
        }
    }

    /// Reads the chat fields of a `POST /v1/chat/completions` body (other fields ignored).
    pub fn from_body(body: &[u8]) -> Result<Self, ChatInputError> {
        let body: Body = match serde_json::from_slice(body) {
            Ok(b) => b,
            Err(e) => return err("messages", format!("cannot be read: {e}")),
        };
        let messages = body
            .messages
            .iter()
            .enumerate()
            .map(|(i, m)| message(i, m))
            .collect::<Result<Vec<_>, _>>()?;
        let tools = match body.tools.filter(|t| !t.is_none()) {
            None => None,
            Some(t) => Some(tools(&t)?),
        };
        if let Some(c) = body.tool_choice.filter(|c| !c.is_none()) {
            tool_choice(&c)?;
        }
        let documents = match body.documents.filter(|d| !d.is_none()) {
            None => None,
            Some(d) if is_list_of_maps(&d) => Some(d),
            Some(_) => return err("documents", "must be an array of objects"),
        };
        let add_generation_prompt = flag(body.add_generation_prompt, "add_generation_prompt")?;
        let continue_final_message =
            flag(body.continue_final_message, "continue_final_message")?.unwrap_or(false);
        if continue_final_message && add_generation_prompt == Some(true) {
            return err(
                "continue_final_message",
                "cannot be set together with `add_generation_prompt`",
            );
        }
        let kwargs = match body.chat_template_kwargs.filter(|k| !k.is_none()) {
            None => Vec::new(),
            Some(k) => kwargs(&k)?,
        };
        Ok(Self {
            messages,
            tools,
            documents,
            add_generation_prompt: add_generation_prompt.unwrap_or(!continue_final_message),
            continue_final_message,
            kwargs,
        })
    }

    /// Whether a request needs more than its messages' roles and string contents: it has a
    /// non-null [`RENDER_FIELDS`] entry, a message with another non-null key, or a content
    /// given as parts. Requests that do not are rendered the same from role and content.
    pub fn needed(body: &[u8]) -> bool {
        let Ok(v) = serde_json::from_slice::<serde_json::Value>(body) else {
            return false;
        };
        let present = |v: &serde_json::Value, k: &str| v.get(k).is_some_and(|x| !x.is_null());
        if RENDER_FIELDS.iter().any(|k| present(&v, k)) {
            return true;
        }
        let Some(messages) = v.get("messages").and_then(|m| m.as_array()) else {
            return false;
        };
        messages.iter().any(|m| {
            m.as_object().is_some_and(|o| {
                o.iter().any(|(k, x)| match k.as_str() {
                    "role" => false,
                    "content" => x.is_array(),
                    _ => !x.is_null(),
                })
            })
        })
    }

    /// Whether the final message is continued rather than a new turn started.
    pub fn continues_final_message(&self) -> bool {
        self.continue_final_message
    }
}

fn flag(v: Option<Value>, param: &'static str) -> Result<Option<bool>, ChatInputError> {
    match v {
        None => Ok(None),
        Some(v) if v.is_none() => Ok(None),
        Some(v) if v.kind() == minijinja::value::ValueKind::Bool => Ok(Some(v.is_true())),
        Some(_) => err(param, "must be a boolean"),
    }
}

fn is_map(v: &Value) -> bool {
    v.kind() == minijinja::value::ValueKind::Map
}

fn is_list_of_maps(v: &Value) -> bool {
    v.kind() == minijinja::value::ValueKind::Seq
        && v.try_iter().is_ok_and(|mut it| it.all(|x| is_map(&x)))
}

/// The map's entries, in order.
fn entries(v: &Value) -> Vec<(Value, Value)> {
    let Ok(keys) = v.try_iter() else {
        return Vec::new();
    };
    keys.map(|k| {
        let x = v.get_item(&k).unwrap_or_default();
        (k, x)
    })
    .collect()
}

fn get(v: &Value, key: &str) -> Option<Value> {
    v.get_attr(key).ok().filter(|x| !x.is_undefined())
}

/// One message, reduced as vLLM reduces it (see the module doc).
fn message(i: usize, m: &Value) -> Result<Value, ChatInputError> {
    if !is_map(m) {
        return err("messages", format!("[{i}] must be an object"));
    }
    let Some(role) = get(m, "role").filter(|r| r.as_str().is_some()) else {
        return err("messages", format!("[{i}].role must be a string"));
    };
    let mut out = Pairs::new();
    out.insert(Value::from("role"), role.clone());
    out.insert(Value::from("content"), Value::from(content(i, m)?));
    match role.as_str() {
        Some("assistant") => {
            if let Some(calls) = get(m, "tool_calls").filter(|c| !c.is_none()) {
                if calls.kind() != minijinja::value::ValueKind::Seq {
                    return err("messages", format!("[{i}].tool_calls must be an array"));
                }
                let calls = calls
                    .try_iter()
                    .map_err(|e| ChatInputError {
                        param: "messages",
                        problem: e.to_string(),
                    })?
                    .map(|c| tool_call(i, &c))
                    .collect::<Result<Vec<_>, _>>()?;
                if !calls.is_empty() {
                    out.insert(Value::from("tool_calls"), Value::from(calls));
                }
            }
        }
        Some("tool") => {
            if let Some(id) = get(m, "tool_call_id") {
                out.insert(Value::from("tool_call_id"), id);
            }
        }
        _ => {}
    }
    for key in ["name", "reasoning_content", "reasoning"] {
        if let Some(v) = get(m, key).filter(|v| v.as_str().is_some()) {
            out.insert(Value::from(key), v);
        }
    }
    Ok(out.into_value())
}

/// A message's content as one string: text parts joined with `\n`.
fn content(i: usize, m: &Value) -> Result<String, ChatInputError> {
    let Some(c) = get(m, "content").filter(|c| !c.is_none()) else {
        return Ok(String::new());
    };
    if let Some(s) = c.as_str() {
        return Ok(s.to_string());
    }
    if c.kind() != minijinja::value::ValueKind::Seq {
        return err(
            "messages",
            format!("[{i}].content must be a string or an array of content parts"),
        );
    }
    let mut texts = Vec::new();
    for part in c.try_iter().into_iter().flatten() {
        if !is_map(&part) {
            return err("messages", format!("[{i}].content[] must be an object"));
        }
        if let Some(t) = get(&part, "text").filter(|t| !t.is_none()) {
            match t.as_str() {
                Some(s) => texts.push(s.to_string()),
                None => return err("messages", format!("[{i}].content[].text must be a string")),
            }
        }
    }
    Ok(texts.join("\n"))
}

/// One assistant tool call, `function.arguments` parsed into an object.
fn tool_call(i: usize, c: &Value) -> Result<Value, ChatInputError> {
    let bad = || {
        err(
            "messages",
            format!(
                "[{i}].tool_calls[] must be objects of type `function` with a `function` object"
            ),
        )
    };
    if !is_map(c) {
        return bad();
    }
    if get(c, "type").is_some_and(|t| t.as_str() != Some("function")) {
        return bad();
    }
    let Some(function) = get(c, "function").filter(is_map) else {
        return bad();
    };
    let mut f = Pairs::new();
    let mut seen_arguments = false;
    for (k, v) in entries(&function) {
        if k.as_str() == Some("arguments") {
            seen_arguments = true;
            f.insert(k, arguments(&v));
        } else {
            f.insert(k, v);
        }
    }
    if !seen_arguments {
        f.insert(Value::from("arguments"), Pairs::new().into_value());
    }
    let mut out = Pairs::new();
    for (k, v) in entries(c) {
        if k.as_str() == Some("function") {
            out.insert(k, f.clone().into_value());
        } else {
            out.insert(k, v);
        }
    }
    Ok(out.into_value())
}

/// vLLM's rule: an object stays; a JSON string that decodes to an object is that object;
/// anything else (empty, not JSON, not an object) is `{}`.
fn arguments(v: &Value) -> Value {
    if is_map(v) {
        return v.clone();
    }
    if let Some(s) = v.as_str().filter(|s| !s.is_empty()) {
        if let Ok(parsed) = serde_json::from_str::<Value>(s) {
            if is_map(&parsed) {
                return parsed;
            }
        }
    }
    Pairs::new().into_value()
}

/// `tools`: function tools, dumped as vLLM's pydantic model dumps them.
fn tools(t: &Value) -> Result<Value, ChatInputError> {
    if t.kind() != minijinja::value::ValueKind::Seq {
        return err("tools", "must be an array of tools");
    }
    let mut out = Vec::new();
    for (i, tool) in t.try_iter().into_iter().flatten().enumerate() {
        let bad = |why: &str| err("tools", format!("[{i}] {why}"));
        if !is_map(&tool) {
            return bad("must be an object");
        }
        if get(&tool, "type").is_some_and(|t| t.as_str() != Some("function")) {
            return bad("must have `type` \"function\"");
        }
        let Some(function) = get(&tool, "function").filter(is_map) else {
            return bad("must have a `function` object");
        };
        if get(&function, "name")
            .and_then(|n| n.as_str().map(|_| ()))
            .is_none()
        {
            return bad("must have a string `function.name`");
        }
        if get(&function, "parameters").is_some_and(|p| !p.is_none() && !is_map(&p)) {
            return bad("must have an object as `function.parameters`");
        }
        let mut f = Pairs::new();
        for key in ["name", "description", "parameters"] {
            f.insert(
                Value::from(key),
                get(&function, key).unwrap_or(Value::from(())),
            );
        }
        for (k, v) in entries(&function) {
            f.insert_absent(k, v);
        }
        let mut dumped = Pairs::new();
        dumped.insert(Value::from("type"), Value::from("function"));
        dumped.insert(Value::from("function"), f.into_value());
        for (k, v) in entries(&tool) {
            dumped.insert_absent(k, v);
        }
        out.push(dumped.into_value());
    }
    Ok(Value::from(out))
}

/// `tool_choice`: `none`, `auto`, `required`, or `{"type": "function", "function": {"name"}}`.
fn tool_choice(c: &Value) -> Result<(), ChatInputError> {
    if matches!(c.as_str(), Some("none" | "auto" | "required")) {
        return Ok(());
    }
    let named = is_map(c)
        && get(c, "function")
            .and_then(|f| get(&f, "name"))
            .is_some_and(|n| n.as_str().is_some());
    if named {
        return Ok(());
    }
    err(
        "tool_choice",
        "must be \"none\", \"auto\", \"required\" or {\"type\": \"function\", \"function\": {\"name\": ...}}",
    )
}

fn kwargs(k: &Value) -> Result<Vec<(String, Value)>, ChatInputError> {
    if !is_map(k) {
        return err("chat_template_kwargs", "must be an object");
    }
    let mut out = Vec::new();
    for (key, v) in entries(k) {
        let Some(name) = key.as_str() else {
            return err("chat_template_kwargs", "keys must be strings");
        };
        if RESERVED_KWARGS.contains(&name) {
            return err(
                "chat_template_kwargs",
                format!("may not set `{name}` (a request field of its own)"),
            );
        }
        out.push((name.to_string(), v));
    }
    Ok(out)
}

/// A map under construction, in insertion order (a second insert of a key replaces it).
#[derive(Clone, Default)]
pub(crate) struct Pairs(Vec<(Value, Value)>);

impl Pairs {
    pub(crate) fn new() -> Self {
        Self::default()
    }

    pub(crate) fn insert(&mut self, k: Value, v: Value) {
        match self.0.iter_mut().find(|(key, _)| *key == k) {
            Some(slot) => slot.1 = v,
            None => self.0.push((k, v)),
        }
    }

    fn insert_absent(&mut self, k: Value, v: Value) {
        if !self.0.iter().any(|(key, _)| *key == k) {
            self.0.push((k, v));
        }
    }

    pub(crate) fn into_value(self) -> Value {
        Value::from_iter(self.0)
    }
}

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

mod error;
mod fields;

pub use error::ChatInputError;

use crate::message::ChatMessage;
use error::err;
use fields::{is_list_of_maps, kwargs, message, tool_choice, tools};
use minijinja::Value;
use serde::Deserialize;

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

#[cfg(test)]
mod tests;

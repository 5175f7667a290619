//! The request's chat fields, each checked and reduced as vLLM prepares it (see the parent
//! module's doc): messages, tool calls and their arguments, tools, `tool_choice`,
//! `chat_template_kwargs`.

use super::error::{err, ChatInputError};
use crate::pairs::Pairs;
use minijinja::Value;

/// `chat_template_kwargs` keys that would replace what the request itself sets.
const RESERVED_KWARGS: [&str; 6] = [
    "messages",
    "tools",
    "documents",
    "add_generation_prompt",
    "continue_final_message",
    "chat_template",
];

fn is_map(v: &Value) -> bool {
    v.kind() == minijinja::value::ValueKind::Map
}

pub(super) fn is_list_of_maps(v: &Value) -> bool {
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
pub(super) fn message(i: usize, m: &Value) -> Result<Value, ChatInputError> {
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
pub(super) fn tools(t: &Value) -> Result<Value, ChatInputError> {
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
pub(super) fn tool_choice(c: &Value) -> Result<(), ChatInputError> {
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

pub(super) fn kwargs(k: &Value) -> Result<Vec<(String, Value)>, ChatInputError> {
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

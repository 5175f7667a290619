//! [`crate::literal`]'s escaping over a whole [`ChatInput`]: every string the template may
//! write (roles, contents, tool calls, tool specs, documents, kwargs, map keys) has its
//! special-token occurrences broken up, so the rendered prompt holds control tokens only
//! where the template wrote them. A message's `content` is also escaped at its edges (as
//! a plain chat's contents are); other strings only inside, so that a template comparing
//! them (`type == "function"`) sees them unchanged.

use crate::chat_input::ChatInput;
use crate::literal::Specials;
use crate::pairs::Pairs;
use minijinja::value::ValueKind;
use minijinja::Value;

/// `input` with its strings escaped.
pub(crate) fn escape_input(specials: &Specials, input: &ChatInput) -> ChatInput {
    let mut out = input.clone();
    out.messages = input
        .messages
        .iter()
        .map(|m| escape(specials, m, true))
        .collect();
    out.tools = input.tools.as_ref().map(|t| escape(specials, t, false));
    out.documents = input.documents.as_ref().map(|d| escape(specials, d, false));
    out.kwargs = input
        .kwargs
        .iter()
        .map(|(k, v)| (k.clone(), escape(specials, v, false)))
        .collect();
    out
}

/// `v` with its strings escaped; `message` marks a message map, whose `content` gets edges.
fn escape(specials: &Specials, v: &Value, message: bool) -> Value {
    match v.kind() {
        ValueKind::String => Value::from(specials.escape(v.as_str().unwrap_or_default(), false)),
        ValueKind::Seq => Value::from(
            v.try_iter()
                .into_iter()
                .flatten()
                .map(|x| escape(specials, &x, false))
                .collect::<Vec<_>>(),
        ),
        ValueKind::Map => {
            let mut map = Pairs::new();
            for k in v.try_iter().into_iter().flatten() {
                let x = v.get_item(&k).unwrap_or_default();
                let escaped = match (message, k.as_str(), x.as_str()) {
                    (true, Some("content"), Some(text)) => Value::from(specials.escape(text, true)),
                    _ => escape(specials, &x, false),
                };
                map.insert(escape(specials, &k, false), escaped);
            }
            map.into_value()
        }
        _ => v.clone(),
    }
}

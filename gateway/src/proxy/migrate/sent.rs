//! What an untagged chat stream's client got, read from each chunk as it passes: the
//! content (the text a continuation by token ids re-tokenizes, `super::completions`),
//! and whether anything else went out that such a text cannot carry.

use serde::Deserialize;
use std::borrow::Cow;

#[derive(Deserialize)]
struct ChatChunk<'a> {
    #[serde(borrow, default)]
    choices: Vec<ChatChoice<'a>>,
}

#[derive(Deserialize)]
struct ChatChoice<'a> {
    #[serde(default)]
    index: u32,
    #[serde(borrow, default)]
    delta: Option<ChatDelta<'a>>,
}

#[derive(Deserialize)]
struct ChatDelta<'a> {
    #[serde(borrow, default)]
    content: Option<Cow<'a, str>>,
    #[serde(default)]
    tool_calls: Option<serde::de::IgnoredAny>,
    #[serde(default)]
    function_call: Option<serde::de::IgnoredAny>,
    #[serde(default)]
    reasoning_content: Option<serde::de::IgnoredAny>,
    #[serde(default)]
    reasoning: Option<serde::de::IgnoredAny>,
}

/// Notes one chat chunk the client got (its JSON `data`): its content appended to `text`;
/// `not_text` set when it held anything a re-tokenized text cannot carry (tool calls,
/// reasoning, a second choice) or could not be read.
pub(crate) fn note_sent(data: &[u8], text: &mut String, not_text: &mut bool) {
    let Ok(chunk) = serde_json::from_slice::<ChatChunk<'_>>(data) else {
        *not_text = true;
        return;
    };
    for c in chunk.choices {
        let Some(d) = c.delta else {
            continue;
        };
        if c.index != 0
            || d.tool_calls.is_some()
            || d.function_call.is_some()
            || d.reasoning_content.is_some()
            || d.reasoning.is_some()
        {
            *not_text = true;
        }
        if let Some(s) = d.content {
            text.push_str(&s);
        }
    }
}

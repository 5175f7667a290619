//! The request body read field by field with the JSON scanner, answering as the serde
//! derives of the replica's request types do: known fields type-checked (a wrong type or a
//! duplicate is an error), unknown fields validated and skipped, `null` reading as absent
//! for optional fields, and a required field missing an error.

use super::types::{Endpoint, Message};
use crate::body::scan::Scanner;
use std::borrow::Cow;
use warmpath_core::TokenId;
use warmpath_text::RENDER_FIELDS;

/// The prompt as written: chat messages, or a completion prompt in one of its three forms.
pub(super) enum PromptField<'a> {
    Chat(Vec<Message<'a>>),
    Text(Cow<'a, str>),
    Tokens(Vec<TokenId>),
    Texts(Vec<Cow<'a, str>>),
}

/// The fields read from a body; semantic checks (`n` range, empty messages, a
/// [`REFUSED_FIELDS`] entry) are the caller's.
pub(super) struct Fields<'a> {
    pub model: Cow<'a, str>,
    pub prompt: PromptField<'a>,
    pub stream: Option<bool>,
    pub max_tokens: Option<u32>,
    pub max_completion_tokens: Option<u32>,
    pub n: Option<u32>,
    /// The first of [`REFUSED_FIELDS`] sent with a non-null value: its name and why.
    pub refused: Option<(&'static str, &'static str)>,
    /// Whether the chat needs more than its roles and string contents to render (the rule
    /// of `warmpath_text::ChatInput::needed`): a non-null `tools`, `tool_choice`,
    /// `documents`, `chat_template_kwargs`, `add_generation_prompt` or
    /// `continue_final_message`, a message with another non-null key, or content parts.
    pub full_render: bool,
}

/// Why an engine-control field is refused.
const ENGINE: &str =
    "controls the inference engine directly and is not accepted through the gateway";

/// Fields a client may not send, each with why (the body is forwarded unchanged, so they
/// are refused rather than stripped): the cache salt, which the gateway sends itself, and
/// fields that steer an inference engine past the gateway's policy (reliability research
/// §8): remote KV transfer (`kv_transfer_params`), scheduler priority, raw engine
/// arguments, vendor extensions, and upstream URLs (an SSRF vector in proxies that honour
/// them).
pub(super) const REFUSED_FIELDS: [(&str, &str); 8] = [
    (
        "cache_salt",
        "is set by the gateway and may not be sent by clients",
    ),
    (
        "warmpath_continuation",
        "is set by the gateway (a migrated stream) and may not be sent by clients",
    ),
    ("kv_transfer_params", ENGINE),
    ("priority", ENGINE),
    ("vllm_xargs", ENGINE),
    ("nvext", ENGINE),
    ("api_base", ENGINE),
    ("base_url", ENGINE),
];

/// Why a body was refused, as a message for the client.
type Refusal = String;

/// The fields of a request body for `endpoint`, or why it cannot be read.
pub(super) fn fields(endpoint: Endpoint, body: &[u8]) -> Result<Fields<'_>, Refusal> {
    let mut refusal = None;
    let read = Scanner::document_at(body, |s| top_level(s, endpoint, &mut refusal));
    match (read, refusal) {
        (Ok(f), _) => Ok(f),
        (Err(_), Some(why)) => Err(why),
        (Err(at), None) => Err(format!("the body is not valid JSON (at byte {at})")),
    }
}

/// Records `why` and stops the scan.
fn refuse<T>(refusal: &mut Option<Refusal>, why: String) -> Option<T> {
    *refusal = Some(why);
    None
}

/// Each known field at most once: marks `bit` seen, or refuses a second `name`.
fn first(seen: &mut u32, bit: u32, name: &str, refusal: &mut Option<Refusal>) -> Option<()> {
    if *seen & bit != 0 {
        return refuse(refusal, format!("duplicate field `{name}`"));
    }
    *seen |= bit;
    Some(())
}

fn top_level<'a>(
    s: &mut Scanner<'a>,
    endpoint: Endpoint,
    refusal: &mut Option<Refusal>,
) -> Option<Fields<'a>> {
    if s.peek()? != b'{' {
        s.skip_value()?;
        return refuse(refusal, "the body must be a JSON object".into());
    }
    let chat = endpoint == Endpoint::Chat;
    let (mut model, mut prompt, mut stream) = (None, None, None);
    let (mut max_tokens, mut max_completion_tokens, mut n) = (None, None, None);
    let mut refused = None;
    let mut full_render = false;
    let mut seen = 0u32;
    s.object(|s, key| {
        let r = &mut *refusal;
        if key.is(b"model") {
            first(&mut seen, 1, "model", r)?;
            model = Some(string(s, "model", r)?);
        } else if chat && key.is(b"messages") {
            first(&mut seen, 2, "messages", r)?;
            prompt = Some(PromptField::Chat(messages(s, r, &mut full_render)?));
        } else if !chat && key.is(b"prompt") {
            first(&mut seen, 2, "prompt", r)?;
            prompt = Some(completion_prompt(s, r)?);
        } else if key.is(b"stream") {
            first(&mut seen, 4, "stream", r)?;
            stream = s
                .bool_or_null()
                .or_else(|| invalid(s, "stream", "a boolean", r))?;
        } else if key.is(b"max_tokens") {
            first(&mut seen, 8, "max_tokens", r)?;
            max_tokens = count(s, "max_tokens", r)?;
        } else if chat && key.is(b"max_completion_tokens") {
            first(&mut seen, 16, "max_completion_tokens", r)?;
            max_completion_tokens = count(s, "max_completion_tokens", r)?;
        } else if key.is(b"n") {
            first(&mut seen, 32, "n", r)?;
            n = count(s, "n", r)?;
        } else if let Some(i) = REFUSED_FIELDS.iter().position(|f| key.is(f.0.as_bytes())) {
            first(&mut seen, 64 << i, REFUSED_FIELDS[i].0, r)?;
            if present(s)? && refused.is_none() {
                refused = Some(REFUSED_FIELDS[i]);
            }
        } else if let Some(i) = RENDER_FIELDS
            .iter()
            .position(|f| chat && key.is(f.as_bytes()))
        {
            first(&mut seen, 1 << (16 + i), RENDER_FIELDS[i], r)?;
            full_render |= present(s)?;
        } else {
            s.skip_value()?;
        }
        Some(())
    })?;
    let Some(model) = model else {
        return refuse(refusal, "missing field `model`".into());
    };
    let Some(prompt) = prompt else {
        let name = if chat { "messages" } else { "prompt" };
        return refuse(refusal, format!("missing field `{name}`"));
    };
    Some(Fields {
        model,
        prompt,
        stream,
        max_tokens,
        max_completion_tokens,
        n,
        refused,
        full_render,
    })
}

/// Skips a field's value: whether it is other than `null` (an `Option` reads `null` as
/// absent).
fn present(s: &mut Scanner<'_>) -> Option<bool> {
    if s.peek()? == b'n' {
        s.literal(b"null")?;
        Some(false)
    } else {
        s.skip_value()?;
        Some(true)
    }
}

/// Refuses the value at the cursor for `field`, which wants `what`. A value that is not even
/// valid JSON is reported as such instead.
fn invalid<T>(s: &mut Scanner<'_>, field: &str, what: &str, r: &mut Option<Refusal>) -> Option<T> {
    s.skip_value()?;
    refuse(r, format!("invalid type for `{field}`: expected {what}"))
}

/// A string field.
fn string<'a>(s: &mut Scanner<'a>, field: &str, r: &mut Option<Refusal>) -> Option<Cow<'a, str>> {
    match s.peek()? {
        b'"' => s.string_value()?.text(),
        _ => invalid(s, field, "a string", r),
    }
}

/// An optional count (`u32`): `null` is absent; a negative, fractional or too large
/// number is refused.
fn count(s: &mut Scanner<'_>, field: &str, r: &mut Option<Refusal>) -> Option<Option<u32>> {
    match s.peek()? {
        b'n' => s.literal(b"null").map(|()| None),
        b'-' | b'0'..=b'9' => match s.integer()? {
            Some(v) => match u32::try_from(v) {
                Ok(v) => Some(Some(v)),
                Err(_) => refuse(r, format!("`{field}` is out of range")),
            },
            None => refuse(
                r,
                format!("invalid type for `{field}`: expected an integer"),
            ),
        },
        _ => invalid(s, field, "an integer", r),
    }
}

/// `messages`: an array of message objects.
fn messages<'a>(
    s: &mut Scanner<'a>,
    r: &mut Option<Refusal>,
    full_render: &mut bool,
) -> Option<Vec<Message<'a>>> {
    if s.peek()? != b'[' {
        return invalid(s, "messages", "an array", r);
    }
    // Most chats are a system and a user message, or a short conversation.
    let mut out = Vec::with_capacity(4);
    s.array(|s| {
        out.push(message(s, r, full_render)?);
        Some(())
    })?;
    Some(out)
}

/// One message: `role` (required) and `content` (a string, an array of parts, or absent);
/// content parts or another non-null key set `full_render`.
fn message<'a>(
    s: &mut Scanner<'a>,
    r: &mut Option<Refusal>,
    full_render: &mut bool,
) -> Option<Message<'a>> {
    if s.peek()? != b'{' {
        return invalid(s, "messages[]", "an object", r);
    }
    let (mut role, mut content) = (None, None);
    let mut seen = 0u32;
    s.object(|s, key| {
        if key.is(b"role") {
            first(&mut seen, 1, "role", r)?;
            role = Some(string(s, "role", r)?);
        } else if key.is(b"content") {
            first(&mut seen, 2, "content", r)?;
            *full_render |= s.peek()? == b'[';
            content = self::content(s, r)?;
        } else {
            *full_render |= present(s)?;
        }
        Some(())
    })?;
    let Some(role) = role else {
        return refuse(r, "missing field `role`".into());
    };
    Some(Message::new(role, content.unwrap_or(Cow::Borrowed(""))))
}

/// A message's `content`: `null` is absent; an array of parts reads as the text of every
/// part, concatenated (as the replica reads it).
fn content<'a>(s: &mut Scanner<'a>, r: &mut Option<Refusal>) -> Option<Option<Cow<'a, str>>> {
    match s.peek()? {
        b'n' => s.literal(b"null").map(|()| None),
        b'"' => s.string_value()?.text().map(Some),
        b'[' => {
            let mut text = String::new();
            s.array(|s| part(s, &mut text, r))?;
            Some(Some(Cow::Owned(text)))
        }
        _ => invalid(s, "content", "a string or an array of content parts", r),
    }
}

/// One content part (an object): its `text`, if any, appended to `text`.
fn part(s: &mut Scanner<'_>, text: &mut String, r: &mut Option<Refusal>) -> Option<()> {
    if s.peek()? != b'{' {
        return invalid(s, "content[]", "an object", r);
    }
    let mut seen = 0u32;
    // Appended as read: a second `text` refuses the whole body anyway.
    s.object(|s, key| {
        if key.is(b"text") {
            first(&mut seen, 1, "text", r)?;
            match s.peek()? {
                b'n' => s.literal(b"null")?,
                _ => text.push_str(&string(s, "text", r)?),
            }
        } else {
            s.skip_value()?;
        }
        Some(())
    })
}

/// A completion `prompt`: a string, an array of token ids, or an array of strings (serde's
/// untagged enum: the first form that fits; `[]` is an empty token list).
fn completion_prompt<'a>(s: &mut Scanner<'a>, r: &mut Option<Refusal>) -> Option<PromptField<'a>> {
    match s.peek()? {
        b'"' => s.string_value()?.text().map(PromptField::Text),
        b'[' => {
            let (mut tokens, mut texts) = (Vec::new(), Vec::new());
            // Whether every element so far fits each array form.
            let (mut all_ids, mut all_texts) = (true, true);
            s.array(|s| {
                match s.peek()? {
                    b'"' => {
                        all_ids = false;
                        texts.push(s.string_value()?.text()?);
                    }
                    b'-' | b'0'..=b'9' => {
                        all_texts = false;
                        match s.integer()?.and_then(|v| u32::try_from(v).ok()) {
                            Some(id) => tokens.push(TokenId(id)),
                            None => all_ids = false,
                        }
                    }
                    _ => {
                        (all_ids, all_texts) = (false, false);
                        s.skip_value()?;
                    }
                }
                Some(())
            })?;
            match (all_ids, all_texts) {
                (true, _) => Some(PromptField::Tokens(tokens)),
                (false, true) => Some(PromptField::Texts(texts)),
                (false, false) => refuse(r, format!("`prompt` must be {PROMPT_SHAPES}")),
            }
        }
        _ => invalid(s, "prompt", PROMPT_SHAPES, r),
    }
}

const PROMPT_SHAPES: &str = "a string, an array of token ids or an array of strings";

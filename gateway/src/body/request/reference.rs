//! The reference for the request reader's property test: the serde derives the gateway
//! read bodies with before the scanner (the shape of the replica's request types), with the
//! same checks after them as [`super::parse`].

use super::{bad, Endpoint, GatewayError, Message, ParsedRequest, Prompt};
use serde::Deserialize;
use std::borrow::Cow;
use std::sync::Arc;
use warmpath_core::TokenId;
use warmpath_text::ChatInput;

#[derive(Deserialize)]
struct ChatBody<'a> {
    #[serde(borrow)]
    model: Cow<'a, str>,
    #[serde(borrow)]
    messages: Vec<RawMessage<'a>>,
    #[serde(default)]
    stream: Option<bool>,
    #[serde(default)]
    max_tokens: Option<u32>,
    #[serde(default)]
    max_completion_tokens: Option<u32>,
    #[serde(default)]
    n: Option<u32>,
}

#[derive(Deserialize)]
struct RawMessage<'a> {
    #[serde(borrow)]
    role: Cow<'a, str>,
    #[serde(default)]
    content: Option<RawContent>,
}

#[derive(Deserialize)]
#[serde(untagged)]
enum RawContent {
    Text(String),
    Parts(Vec<Part>),
}

#[derive(Deserialize)]
struct Part {
    #[serde(default)]
    text: Option<String>,
}

#[derive(Deserialize)]
struct CompletionBody {
    model: String,
    prompt: PromptForm,
    #[serde(default)]
    stream: Option<bool>,
    #[serde(default)]
    max_tokens: Option<u32>,
    #[serde(default)]
    n: Option<u32>,
}

/// The fields clients may not send (`read::REFUSED_FIELDS`), read in a second pass over
/// the body.
#[derive(Deserialize)]
struct RefusedFields {
    #[serde(default)]
    cache_salt: Option<serde::de::IgnoredAny>,
    #[serde(default)]
    kv_transfer_params: Option<serde::de::IgnoredAny>,
    #[serde(default)]
    priority: Option<serde::de::IgnoredAny>,
    #[serde(default)]
    vllm_xargs: Option<serde::de::IgnoredAny>,
    #[serde(default)]
    nvext: Option<serde::de::IgnoredAny>,
    #[serde(default)]
    api_base: Option<serde::de::IgnoredAny>,
    #[serde(default)]
    base_url: Option<serde::de::IgnoredAny>,
}

impl RefusedFields {
    /// Whether any was sent non-null; a duplicate is an invalid body.
    fn any(body: &[u8]) -> Result<bool, serde_json::Error> {
        let e: Self = serde_json::from_slice(body)?;
        Ok(e.cache_salt.is_some()
            || e.kv_transfer_params.is_some()
            || e.priority.is_some()
            || e.vllm_xargs.is_some()
            || e.nvext.is_some()
            || e.api_base.is_some()
            || e.base_url.is_some())
    }
}

#[derive(Deserialize)]
#[serde(untagged)]
enum PromptForm {
    Text(String),
    Tokens(Vec<u32>),
    Texts(Vec<String>),
}

/// Whether serde's derive would read an array where this reader refuses one (the body, a
/// message, or a content part written positionally).
pub(super) fn positional(endpoint: Endpoint, body: &[u8]) -> bool {
    let Ok(v) = serde_json::from_slice::<serde_json::Value>(body) else {
        return false;
    };
    let messages = v
        .get("messages")
        .filter(|_| endpoint == Endpoint::Chat)
        .and_then(|m| m.as_array());
    v.is_array()
        || messages.is_some_and(|ms| {
            ms.iter().any(|m| {
                m.is_array()
                    || m.get("content")
                        .and_then(|c| c.as_array())
                        .is_some_and(|ps| ps.iter().any(|p| p.is_array()))
            })
        })
}

/// The serde reading, with the same checks after it as [`super::parse`].
pub(super) fn reference(
    endpoint: Endpoint,
    body: &[u8],
) -> Result<ParsedRequest<'_>, GatewayError> {
    let invalid = |e: serde_json::Error| GatewayError::InvalidBody(e.to_string());
    let parsed = match endpoint {
        Endpoint::Chat => {
            let b: ChatBody<'_> = serde_json::from_slice(body).map_err(invalid)?;
            if RefusedFields::any(body).map_err(invalid)? {
                return Err(bad("refused field"));
            }
            if b.messages.is_empty() {
                return Err(bad("empty"));
            }
            let msgs = b.messages.into_iter().map(|m| {
                let content = match m.content {
                    None => Cow::Borrowed(""),
                    Some(RawContent::Text(t)) => Cow::Owned(t),
                    Some(RawContent::Parts(p)) => {
                        Cow::Owned(p.iter().filter_map(|p| p.text.as_deref()).collect())
                    }
                };
                Message::new(m.role, content)
            });
            ParsedRequest {
                model: b.model,
                stream: b.stream.unwrap_or(false),
                max_tokens: b.max_completion_tokens.or(b.max_tokens),
                n: b.n.unwrap_or(1),
                prompt: Prompt::Chat(msgs.collect()),
                chat_input: if ChatInput::needed(body) {
                    Some(Arc::new(
                        ChatInput::from_body(body).map_err(|e| bad(e.to_string()))?,
                    ))
                } else {
                    None
                },
            }
        }
        Endpoint::Completions => {
            let b: CompletionBody = serde_json::from_slice(body).map_err(invalid)?;
            if RefusedFields::any(body).map_err(invalid)? {
                return Err(bad("refused field"));
            }
            let prompt = match b.prompt {
                PromptForm::Text(t) => Prompt::Text(Cow::Owned(t)),
                PromptForm::Tokens(t) => Prompt::Tokens(t.into_iter().map(TokenId).collect()),
                PromptForm::Texts(mut v) if v.len() == 1 => Prompt::Text(Cow::Owned(v.remove(0))),
                PromptForm::Texts(_) => return Err(bad("batched")),
            };
            ParsedRequest {
                model: Cow::Owned(b.model),
                stream: b.stream.unwrap_or(false),
                max_tokens: b.max_tokens,
                n: b.n.unwrap_or(1),
                prompt,
                chat_input: None,
            }
        }
        Endpoint::Passthrough(_) => return Err(bad("not a generation endpoint")),
    };
    if parsed.n == 0 || parsed.n > 16 {
        return Err(bad("n"));
    }
    if parsed.model.is_empty() {
        return Err(bad("model"));
    }
    Ok(parsed)
}

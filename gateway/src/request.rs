//! What the gateway reads from an OpenAI request body: model, prompt, stream flag and the
//! token budget, read the way the replica reads them (`warmpath_protocol::openai`). The body
//! itself is forwarded unchanged, and the strings read from it are borrowed from it where
//! they hold no escapes (a 25 KB system prompt is hashed in place, not copied).

use crate::error::GatewayError;
use crate::tokenize::ChatText;
use router_policy::TokenId;
use serde::Deserialize;
use std::borrow::Cow;

/// Which OpenAI endpoint.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Endpoint {
    /// `POST /v1/chat/completions`.
    Chat,
    /// `POST /v1/completions`.
    Completions,
}

impl Endpoint {
    /// Metric label.
    pub fn as_str(self) -> &'static str {
        match self {
            Endpoint::Chat => "chat",
            Endpoint::Completions => "completions",
        }
    }
}

/// One chat message of a request, borrowed from the body where it can be.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Message<'a> {
    /// `system`, `user`, `assistant`, ...
    pub role: Cow<'a, str>,
    /// Message text (the text of every part, concatenated, for an array of parts).
    pub content: Cow<'a, str>,
}

impl<'a> Message<'a> {
    /// A message from its parts.
    pub fn new(role: impl Into<Cow<'a, str>>, content: impl Into<Cow<'a, str>>) -> Self {
        Self {
            role: role.into(),
            content: content.into(),
        }
    }
}

impl ChatText for Message<'_> {
    fn role(&self) -> &str {
        &self.role
    }
    fn content(&self) -> &str {
        &self.content
    }
}

/// The prompt, as the gateway tokenizes it.
#[derive(Clone, Debug, PartialEq)]
pub enum Prompt<'a> {
    /// Chat messages (rendered with the template).
    Chat(Vec<Message<'a>>),
    /// Completion prompt text.
    Text(Cow<'a, str>),
    /// Completion prompt given as token ids.
    Tokens(Vec<TokenId>),
}

/// The fields of a request the gateway uses, borrowing from the body.
#[derive(Clone, Debug, PartialEq)]
pub struct ParsedRequest<'a> {
    /// Model name.
    pub model: Cow<'a, str>,
    /// SSE streaming requested.
    pub stream: bool,
    /// `max_tokens` / `max_completion_tokens`.
    pub max_tokens: Option<u32>,
    /// Number of choices.
    pub n: u32,
    /// The prompt.
    pub prompt: Prompt<'a>,
}

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
    #[serde(default)]
    cache_salt: Option<serde::de::IgnoredAny>,
}

#[derive(Deserialize)]
struct RawMessage<'a> {
    #[serde(borrow)]
    role: Cow<'a, str>,
    #[serde(default, borrow)]
    content: Option<Content<'a>>,
}

/// Message content: a string or an array of parts. Deserialized directly (an untagged enum
/// would first copy the whole value, a long system prompt included, into a buffer), and a
/// string without escapes is borrowed from the body.
enum Content<'a> {
    Text(Cow<'a, str>),
    Parts(Vec<Part>),
}

impl<'de: 'a, 'a> Deserialize<'de> for Content<'a> {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V<'a>(std::marker::PhantomData<&'a ()>);
        impl<'de: 'a, 'a> serde::de::Visitor<'de> for V<'a> {
            type Value = Content<'a>;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a string or an array of content parts")
            }
            fn visit_borrowed_str<E>(self, v: &'de str) -> Result<Content<'a>, E> {
                Ok(Content::Text(Cow::Borrowed(v)))
            }
            fn visit_str<E>(self, v: &str) -> Result<Content<'a>, E> {
                Ok(Content::Text(Cow::Owned(v.to_string())))
            }
            fn visit_string<E>(self, v: String) -> Result<Content<'a>, E> {
                Ok(Content::Text(Cow::Owned(v)))
            }
            fn visit_seq<A: serde::de::SeqAccess<'de>>(
                self,
                mut seq: A,
            ) -> Result<Content<'a>, A::Error> {
                let mut parts = Vec::with_capacity(seq.size_hint().unwrap_or(1));
                while let Some(p) = seq.next_element::<Part>()? {
                    parts.push(p);
                }
                Ok(Content::Parts(parts))
            }
        }
        d.deserialize_any(V(std::marker::PhantomData))
    }
}

#[derive(Deserialize)]
struct Part {
    #[serde(default)]
    text: Option<String>,
}

#[derive(Deserialize)]
struct CompletionBody {
    model: String,
    prompt: PromptField,
    #[serde(default)]
    stream: Option<bool>,
    #[serde(default)]
    max_tokens: Option<u32>,
    #[serde(default)]
    n: Option<u32>,
    #[serde(default)]
    cache_salt: Option<serde::de::IgnoredAny>,
}

#[derive(Deserialize)]
#[serde(untagged)]
enum PromptField {
    Text(String),
    Tokens(Vec<u32>),
    Texts(Vec<String>),
}

fn bad(msg: impl Into<String>) -> GatewayError {
    GatewayError::BadRequest(msg.into())
}

/// Parses the body of `endpoint`.
pub fn parse(endpoint: Endpoint, body: &[u8]) -> Result<ParsedRequest<'_>, GatewayError> {
    let parsed = match endpoint {
        Endpoint::Chat => {
            let b: ChatBody<'_> = serde_json::from_slice(body)
                .map_err(|e| GatewayError::InvalidBody(e.to_string()))?;
            if b.cache_salt.is_some() {
                return Err(bad(
                    "`cache_salt` is set by the gateway and may not be sent by clients",
                ));
            }
            if b.messages.is_empty() {
                return Err(bad("`messages` must not be empty"));
            }
            let mut msgs = Vec::with_capacity(b.messages.len());
            for m in b.messages {
                let content = match m.content {
                    None => Cow::Borrowed(""),
                    Some(Content::Text(t)) => t,
                    // As the replica does: the text of every part, concatenated.
                    Some(Content::Parts(parts)) => {
                        Cow::Owned(parts.iter().filter_map(|p| p.text.as_deref()).collect())
                    }
                };
                msgs.push(Message::new(m.role, content));
            }
            ParsedRequest {
                model: b.model,
                stream: b.stream.unwrap_or(false),
                max_tokens: b.max_completion_tokens.or(b.max_tokens),
                n: b.n.unwrap_or(1),
                prompt: Prompt::Chat(msgs),
            }
        }
        Endpoint::Completions => {
            let b: CompletionBody = serde_json::from_slice(body)
                .map_err(|e| GatewayError::InvalidBody(e.to_string()))?;
            if b.cache_salt.is_some() {
                return Err(bad(
                    "`cache_salt` is set by the gateway and may not be sent by clients",
                ));
            }
            let prompt = match b.prompt {
                PromptField::Text(t) => Prompt::Text(Cow::Owned(t)),
                PromptField::Tokens(t) => Prompt::Tokens(t.into_iter().map(TokenId).collect()),
                PromptField::Texts(mut v) if v.len() == 1 => Prompt::Text(Cow::Owned(v.remove(0))),
                PromptField::Texts(_) => {
                    return Err(bad("batched prompts are not supported; send one prompt"))
                }
            };
            ParsedRequest {
                model: Cow::Owned(b.model),
                stream: b.stream.unwrap_or(false),
                max_tokens: b.max_tokens,
                n: b.n.unwrap_or(1),
                prompt,
            }
        }
    };
    if parsed.n == 0 || parsed.n > 16 {
        return Err(bad("`n` must be within 1..=16"));
    }
    if parsed.model.is_empty() {
        return Err(bad("`model` must not be empty"));
    }
    Ok(parsed)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_chat_with_parts() {
        let body = br#"{"model":"m","messages":[{"role":"system","content":"s"},
            {"role":"user","content":[{"type":"text","text":"a"},{"type":"text","text":"b"}]}],
            "stream":true,"max_completion_tokens":7}"#;
        let p = parse(Endpoint::Chat, body).unwrap();
        assert!(p.stream);
        assert_eq!(p.max_tokens, Some(7));
        assert_eq!(
            p.prompt,
            Prompt::Chat(vec![
                Message::new("system", "s"),
                Message::new("user", "ab")
            ])
        );
    }

    #[test]
    fn rejects_malformed_and_hostile_bodies() {
        assert!(matches!(
            parse(Endpoint::Chat, b"{not json"),
            Err(GatewayError::InvalidBody(_))
        ));
        assert!(matches!(
            parse(
                Endpoint::Chat,
                br#"{"model":"a","model":"b","messages":[{"role":"user","content":"x"}]}"#
            ),
            Err(GatewayError::InvalidBody(_))
        ));
        assert!(parse(
            Endpoint::Chat,
            br#"{"model":"m","messages":[{"role":"user","content":"x"}],"cache_salt":"evil"}"#
        )
        .is_err());
        assert!(parse(Endpoint::Chat, br#"{"model":"m","messages":[]}"#).is_err());
        assert!(parse(
            Endpoint::Completions,
            br#"{"model":"m","prompt":"x","n":1000}"#
        )
        .is_err());
    }

    #[test]
    fn parses_completion_prompts() {
        let p = parse(
            Endpoint::Completions,
            br#"{"model":"m","prompt":[1,2,3],"max_tokens":5}"#,
        )
        .unwrap();
        assert_eq!(
            p.prompt,
            Prompt::Tokens(vec![TokenId(1), TokenId(2), TokenId(3)])
        );
        let p = parse(Endpoint::Completions, br#"{"model":"m","prompt":"hi"}"#).unwrap();
        assert_eq!(p.prompt, Prompt::Text("hi".into()));
        // Strings without escapes are borrowed from the body; escaped ones are unescaped.
        let body = br#"{"model":"m","messages":[{"role":"user","content":"plain"},
            {"role":"user","content":"a\nb"}]}"#;
        let p = parse(Endpoint::Chat, body).unwrap();
        let Prompt::Chat(m) = &p.prompt else {
            panic!("a chat")
        };
        assert!(matches!(m[0].content, Cow::Borrowed("plain")));
        assert!(matches!(&m[1].content, Cow::Owned(s) if s == "a\nb"));
        assert!(matches!(p.model, Cow::Borrowed("m")));
        assert!(!p.stream);
    }
}

//! What the gateway reads from an OpenAI request body: model, prompt, stream flag and the
//! token budget, read the way the replica reads them (`warmpath_protocol::openai`). The body
//! itself is forwarded unchanged.

use crate::error::GatewayError;
use router_policy::TokenId;
use serde::Deserialize;
use warmpath_protocol::text::ChatMessage;

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

/// The prompt, as the gateway tokenizes it.
#[derive(Clone, Debug, PartialEq)]
pub enum Prompt {
    /// Chat messages (rendered with the template).
    Chat(Vec<ChatMessage>),
    /// Completion prompt text.
    Text(String),
    /// Completion prompt given as token ids.
    Tokens(Vec<TokenId>),
}

/// The fields of a request the gateway uses.
#[derive(Clone, Debug, PartialEq)]
pub struct ParsedRequest {
    /// Model name.
    pub model: String,
    /// SSE streaming requested.
    pub stream: bool,
    /// `max_tokens` / `max_completion_tokens`.
    pub max_tokens: Option<u32>,
    /// Number of choices.
    pub n: u32,
    /// The prompt.
    pub prompt: Prompt,
}

#[derive(Deserialize)]
struct ChatBody {
    model: String,
    messages: Vec<Message>,
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
struct Message {
    role: String,
    #[serde(default)]
    content: Option<Content>,
}

/// Message content: a string or an array of parts. Deserialized directly (an untagged enum
/// would first copy the whole value, a long system prompt included, into a buffer).
enum Content {
    Text(String),
    Parts(Vec<Part>),
}

impl<'de> Deserialize<'de> for Content {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> serde::de::Visitor<'de> for V {
            type Value = Content;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a string or an array of content parts")
            }
            fn visit_str<E>(self, v: &str) -> Result<Content, E> {
                Ok(Content::Text(v.to_string()))
            }
            fn visit_string<E>(self, v: String) -> Result<Content, E> {
                Ok(Content::Text(v))
            }
            fn visit_seq<A: serde::de::SeqAccess<'de>>(
                self,
                mut seq: A,
            ) -> Result<Content, A::Error> {
                let mut parts = Vec::with_capacity(seq.size_hint().unwrap_or(1));
                while let Some(p) = seq.next_element::<Part>()? {
                    parts.push(p);
                }
                Ok(Content::Parts(parts))
            }
        }
        d.deserialize_any(V)
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
pub fn parse(endpoint: Endpoint, body: &[u8]) -> Result<ParsedRequest, GatewayError> {
    let parsed = match endpoint {
        Endpoint::Chat => {
            let b: ChatBody = serde_json::from_slice(body)
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
                    None => String::new(),
                    Some(Content::Text(t)) => t,
                    // As the replica does: the text of every part, concatenated.
                    Some(Content::Parts(parts)) => {
                        parts.iter().filter_map(|p| p.text.as_deref()).collect()
                    }
                };
                msgs.push(ChatMessage::new(m.role, content));
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
                PromptField::Text(t) => Prompt::Text(t),
                PromptField::Tokens(t) => Prompt::Tokens(t.into_iter().map(TokenId).collect()),
                PromptField::Texts(mut v) if v.len() == 1 => Prompt::Text(v.remove(0)),
                PromptField::Texts(_) => {
                    return Err(bad("batched prompts are not supported; send one prompt"))
                }
            };
            ParsedRequest {
                model: b.model,
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
                ChatMessage::new("system", "s"),
                ChatMessage::new("user", "ab")
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
        assert!(!p.stream);
    }
}

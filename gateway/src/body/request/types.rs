//! The request as the gateway routes it: which endpoint, the prompt (chat messages, text
//! or token ids) and the fields that bound its cost, borrowing from the body.

use crate::tokenize::ChatText;
use std::borrow::Cow;
use std::sync::Arc;
use warmpath_core::TokenId;
use warmpath_text::ChatInput;

/// Which OpenAI endpoint.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Endpoint {
    /// `POST /v1/chat/completions`.
    Chat,
    /// `POST /v1/completions`.
    Completions,
    /// `POST /v1/embeddings`, `/tokenize`, `/detokenize`: passed through by load
    /// (`crate::proxy::passthrough`).
    Passthrough(crate::config::PassthroughApi),
}

impl Endpoint {
    /// Metric label.
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Endpoint::Chat => "chat",
            Endpoint::Completions => "completions",
            Endpoint::Passthrough(api) => api.as_str(),
        }
    }
}

/// One chat message of a request, borrowed from the body where it can be.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Message<'a> {
    /// `system`, `user`, `assistant`, ...
    pub role: Cow<'a, str>,
    /// Message text (the text of every part, concatenated, for an array of parts).
    pub content: Cow<'a, str>,
}

impl<'a> Message<'a> {
    /// A message from its parts.
    pub(crate) fn new(role: impl Into<Cow<'a, str>>, content: impl Into<Cow<'a, str>>) -> Self {
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
pub(crate) enum Prompt<'a> {
    /// Chat messages (rendered with the template).
    Chat(Vec<Message<'a>>),
    /// Completion prompt text.
    Text(Cow<'a, str>),
    /// Completion prompt given as token ids.
    Tokens(Vec<TokenId>),
}

/// The fields of a request the gateway uses, borrowing from the body.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct ParsedRequest<'a> {
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
    /// A chat's whole template input (tools, tool calls, documents, template kwargs), when
    /// its roles and string contents are not all the template reads; `None` otherwise.
    pub chat_input: Option<Arc<ChatInput>>,
}

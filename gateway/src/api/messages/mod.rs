//! Anthropic's Messages API (`POST /v1/messages`), served by translation: the request
//! becomes a chat-completions body ([`request`]) that takes the chat path unchanged (same
//! tokens and block hashes as the same conversation sent as a chat, same limits, routing,
//! retries and accounting); the chat answer comes back as an Anthropic message
//! ([`reply`]) or, streamed, as Anthropic's event stream ([`stream`]). Errors on this
//! endpoint are Anthropic's shape ([`error`]); the key may come as `x-api-key`
//! ([`auth`]). See `docs/anthropic-messages.md`.

pub(crate) mod auth;
pub(crate) mod error;
pub(crate) mod reply;
pub(crate) mod request;
pub(crate) mod stream;

use bytes::Bytes;
pub(crate) use request::{to_chat, Call};

/// The path this API is served on.
pub(crate) const PATH: &str = "/v1/messages";

/// The path the translated request is sent to.
pub(crate) const UPSTREAM_PATH: &str = "/v1/chat/completions";

/// One `/v1/messages` request's translation state, kept in the request's context from
/// the route table on (so even an error before the body is read is Anthropic-shaped).
#[derive(Debug, Default)]
pub(crate) struct Exchange {
    /// What the client asked for (set once the body is translated).
    pub call: Call,
    /// Prompt tokens as the gateway counted them (the stream's `message_start` usage).
    pub prompt_tokens: u32,
    /// A plain answer (or an error) gathered whole before it is translated.
    gathered: Vec<u8>,
    /// The event-stream translator (streams with status 200 only).
    stream: Option<stream::Translator>,
}

impl Exchange {
    /// Translates one piece of the replica's answer (`status`) in place: a stream event by
    /// event, anything else whole at its end (the pieces before are held back).
    pub(crate) fn body(&mut self, status: u16, body: &mut Option<Bytes>, end: bool) {
        if self.call.stream && status == 200 {
            let t = self.stream.get_or_insert_with(|| {
                stream::Translator::new(self.call.clone(), self.prompt_tokens)
            });
            let input = body.take().unwrap_or_default();
            let out = t.push(&input, end);
            *body = (!out.is_empty() || end).then(|| Bytes::from(out));
            return;
        }
        if let Some(b) = body.take() {
            self.gathered.extend_from_slice(&b);
        }
        if end {
            let whole = std::mem::take(&mut self.gathered);
            let out = if status == 200 {
                reply::message(&whole, &self.call)
            } else {
                error::from_upstream(status, &whole)
            };
            *body = Some(Bytes::from(out));
        }
    }

    /// An OpenAI-shaped SSE error event the gateway writes itself into a stream under way,
    /// as the Anthropic `error` event.
    pub(crate) fn stream_error(&mut self, openai_event: &[u8]) -> Bytes {
        let t = self
            .stream
            .get_or_insert_with(|| stream::Translator::new(self.call.clone(), self.prompt_tokens));
        Bytes::from(t.push(openai_event, true))
    }
}

#[cfg(test)]
mod tests;

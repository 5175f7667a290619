//! Tokenizing a request's prompt with a replica's tokenizer, on the thread that calls it.
//! A long request's parse and tokenization are moved off the event loop by the caller
//! (`crate::tokenize::gate`, in `super::request::decide`).

use crate::body::request::{ParsedRequest, Prompt};
use crate::encoder::PromptEncoder;
use crate::error::GatewayError;
use crate::replicas::Replica;
use std::sync::Arc;
use warmpath_core::TokenId;
use warmpath_text::ChatInput;

/// Tokenizes the prompt of `req` with `replica`'s tokenizer on this thread: a chat with
/// tools, tool calls or template kwargs from its whole template input, as the engine
/// renders it.
pub(crate) fn tokenize_in_place(
    replica: &Replica,
    req: &ParsedRequest<'_>,
) -> Result<Vec<TokenId>, GatewayError> {
    encode(&replica.tokenizer, &req.prompt, req.chat_input.as_ref())
}

fn encode(
    encoder: &PromptEncoder,
    prompt: &Prompt<'_>,
    chat_input: Option<&Arc<ChatInput>>,
) -> Result<Vec<TokenId>, GatewayError> {
    let r = match prompt {
        Prompt::Chat(msgs) => match chat_input {
            Some(input) => encoder.encode_chat_input(input, msgs),
            None => encoder.encode_chat(msgs),
        },
        Prompt::Text(t) => encoder.encode(t, true),
        Prompt::Tokens(t) => return Ok(t.clone()),
    };
    r.map_err(|e| GatewayError::BadRequest(format!("cannot tokenize the prompt: {e}")))
}

//! Tokenizing a request's prompt with a replica's tokenizer, on the request's own thread.
//!
//! Tokenizing long prompts on tokio's blocking pool (tried in BENCHMARKS.md section 26: it
//! kept short chats' p99 beside 128k-token prompts at 3.5x instead of 23x) is not done:
//! every long request then parses and holds its decoded text while others are read, and
//! the gateway's peak memory with 64 x 4 MiB bodies in flight rose from 419 MiB to
//! 650-811 MiB, past the bound `tests/tests/large_bodies.rs` asserts. Doing it needs the
//! parse itself bounded too.

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

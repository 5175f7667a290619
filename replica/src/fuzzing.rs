//! Fuzz entry points for the replica's request parsers, behind the `fuzzing` feature (only
//! the `warmpath-fuzz` crate turns it on): each is a function of arbitrary bytes that
//! panics when an invariant breaks.

use crate::server::error::ApiError;
use crate::server::http::generate::parse;
use crate::server::http::params::sampling_params;
use warmpath_protocol::openai::{ChatCompletionRequest, CompletionRequest, SamplingFields};
use warmpath_protocol::replica_api::PrefillRequest;

/// The context window the checks use.
const MAX_CONTEXT: usize = 2048;
/// The KV pool, in tokens, the checks use.
const POOL_TOKENS: usize = 4096;

/// A body for `POST /v1/chat/completions`, `/v1/completions` or `/v1/kv/prefill`: it parses
/// or is refused with a 4xx OpenAI error, and sampling fields that parse either become
/// parameters within the context window and the pool, or are refused with a 4xx.
pub fn request(data: &[u8]) {
    // The prompt length the checks pretend: derived from the input, so it varies.
    let prompt_len = data.len() % (MAX_CONTEXT + 64);
    check(
        parse::<ChatCompletionRequest>(data).map(|r| r.sampling),
        prompt_len,
    );
    check(
        parse::<CompletionRequest>(data).map(|r| r.sampling),
        prompt_len,
    );
    if let Ok(r) = serde_json::from_slice::<PrefillRequest>(data) {
        let _ = r.prompt.len();
    }
}

fn check(parsed: Result<SamplingFields, ApiError>, prompt_len: usize) {
    let fields = match parsed {
        Ok(f) => f,
        Err(e) => return client_error(&e),
    };
    match sampling_params(&fields, prompt_len, MAX_CONTEXT, POOL_TOKENS) {
        Ok(p) => {
            assert!(p.max_tokens >= 1, "max_tokens {}", p.max_tokens);
            assert!(
                prompt_len + p.max_tokens <= MAX_CONTEXT,
                "prompt {prompt_len} + max_tokens {} past the context window",
                p.max_tokens
            );
            assert!(prompt_len + p.max_tokens <= POOL_TOKENS);
            assert!((0.0..=2.0).contains(&p.temperature), "{}", p.temperature);
            assert!((0.0..=1.0).contains(&p.top_p), "top_p {}", p.top_p);
        }
        Err(e) => client_error(&e),
    }
}

fn client_error(e: &ApiError) {
    assert!(
        e.status().is_client_error(),
        "{e} answered with {}",
        e.status()
    );
    let body = e.body();
    assert!(!body.error.message.is_empty());
}

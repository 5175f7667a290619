//! A continuation of a migrated stream ([`Continuation`], sent by the gateway when the
//! replica that started the stream failed): the tokens that replica generated are replayed
//! after the prompt, one per decode step as they were first computed (a prefill of them
//! would round differently, and SmolLM2 amplifies that), the text of theirs the client
//! already holds is not sent again (what it does not hold yet is sent first), the sampler
//! resumes at its position in the random stream, and `max_tokens` counts the tokens before
//! the seam. Greedy and seeded answers come out token for token as an uninterrupted run's.

use crate::server::error::ApiError;
use warmpath_core::TokenId;
use warmpath_engine::sampling::{Sampler, SamplingParams};
use warmpath_protocol::continuation::Continuation;
use warmpath_text::{ChatTokenizer, StreamDecoder};

/// Where a job's answer starts: nothing yet (a fresh request), or a continuation's state.
#[derive(Debug, Default)]
pub struct Resumed {
    /// Tokens generated before the seam (counted in the answer's usage).
    pub prior_tokens: usize,
    /// Bytes of their text the client already holds.
    pub sent_bytes: u64,
    /// Their text the client does not hold yet (held back for a stop string).
    pub unsent: String,
}

impl Resumed {
    /// Whether the answer continues one another replica started (no role chunk: the
    /// client already had it).
    pub fn continues(&self) -> bool {
        self.prior_tokens > 0 || self.sent_bytes > 0
    }
}

/// A checked continuation: what the engine loop and the answer need.
#[derive(Debug)]
pub struct Resume {
    /// The generated ids, to replay after the prompt.
    pub prior: Vec<TokenId>,
    /// The decoder, primed with those ids.
    pub decoder: StreamDecoder,
    /// The answer's starting state.
    pub resumed: Resumed,
    /// Random draws the sampler already took.
    pub rng_draws: u64,
}

fn invalid(message: String) -> ApiError {
    ApiError::InvalidParam {
        param: warmpath_protocol::continuation::FIELD,
        message,
    }
}

/// Checks `c` against the vocabulary and the request's `params` (whose `max_tokens` must
/// leave something after the tokens already generated), and primes a decoder with them.
pub fn resume(
    c: &Continuation,
    tokenizer: &ChatTokenizer,
    vocab: usize,
    params: &SamplingParams,
) -> Result<Resume, ApiError> {
    if let Some(bad) = c.tokens.iter().find(|&&t| t as usize >= vocab) {
        return Err(invalid(format!(
            "token id {bad} is outside the vocabulary ({vocab} ids)"
        )));
    }
    if c.tokens.len() >= params.max_tokens {
        return Err(invalid(format!(
            "{} tokens already generated leave nothing of max_tokens ({})",
            c.tokens.len(),
            params.max_tokens
        )));
    }
    let prior: Vec<TokenId> = c.tokens.iter().map(|&t| TokenId(t)).collect();
    let mut decoder = tokenizer.stream_decoder();
    let mut text = String::new();
    for &t in &prior {
        if let Some(s) = decoder.push(t) {
            text.push_str(&s);
        }
    }
    let sent = usize::try_from(c.text_bytes).unwrap_or(usize::MAX);
    let Some(unsent) = text.get(sent..) else {
        return Err(invalid(format!(
            "text_bytes ({}) is not a character boundary of the tokens' {} bytes of text",
            c.text_bytes,
            text.len()
        )));
    };
    let rng_draws = c
        .rng_draws
        .unwrap_or(prior.len() as u64 * Sampler::draws_per_token(params));
    Ok(Resume {
        resumed: Resumed {
            prior_tokens: prior.len(),
            sent_bytes: c.text_bytes,
            unsent: unsent.to_string(),
        },
        prior,
        decoder,
        rng_draws,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use warmpath_text::bytelevel::byte_level_spec;

    fn tok() -> ChatTokenizer {
        ChatTokenizer::from_spec(&byte_level_spec(300)).unwrap()
    }

    fn cont(tokens: &[TokenId], text_bytes: u64) -> Continuation {
        Continuation {
            tokens: tokens.iter().map(|t| t.0).collect(),
            text_bytes,
            rng_draws: None,
        }
    }

    #[test]
    fn the_unsent_text_is_sent_first_and_max_tokens_counts_the_seam() {
        let t = tok();
        let ids = t.encode("h\u{e9}llo", false).unwrap();
        assert_eq!(ids.len(), 6, "one token per byte");
        let params = SamplingParams {
            max_tokens: 10,
            ..Default::default()
        };
        let r = resume(&cont(&ids, 3), &t, 300, &params).unwrap();
        assert_eq!(r.resumed.unsent, "llo");
        assert_eq!(r.resumed.prior_tokens, 6);
        assert!(r.resumed.continues());
        assert_eq!(r.prior, ids);
        assert_eq!(r.rng_draws, 0, "greedy takes no draws");
        let seeded = SamplingParams {
            max_tokens: 10,
            temperature: 0.7,
            seed: Some(3),
            ..Default::default()
        };
        let r = resume(&cont(&ids, 6), &t, 300, &seeded).unwrap();
        assert_eq!(r.rng_draws, 6, "one draw per token sampled at random");
        assert_eq!(r.resumed.unsent, "");
    }

    #[test]
    fn a_continuation_that_cannot_be_right_is_refused() {
        let t = tok();
        let ids = t.encode("h\u{e9}llo", false).unwrap();
        let max = |max_tokens| SamplingParams {
            max_tokens,
            ..Default::default()
        };
        let refused = |c: Continuation, max_tokens| resume(&c, &t, 300, &max(max_tokens)).is_err();
        assert!(refused(cont(&ids, 2), 10), "inside a character");
        assert!(refused(cont(&ids, 7), 10), "more text than the tokens have");
        assert!(
            refused(cont(&[TokenId(300)], 0), 10),
            "outside the vocabulary"
        );
        assert!(refused(cont(&ids, 6), 6), "nothing left of max_tokens");
        assert!(!refused(cont(&ids, 6), 7));
    }
}

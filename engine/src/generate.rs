//! Single-sequence generation on a private engine (CLI, benchmarks, tests). The server
//! has its own scheduler; this uses pages `0..` of the pool directly.

use super::sampling::{find_stop, Sampler, SamplingParams};
use super::{Engine, EngineError, PageId, StepItem};
use warmpath_core::TokenId;

/// Result of [`generate`].
#[derive(Clone, Debug, PartialEq)]
pub struct Generation {
    /// Generated token ids (stop tokens excluded).
    pub tokens: Vec<TokenId>,
    /// Decoded text of `tokens` (cut at a stop string).
    pub text: String,
    /// Log-probability of each generated token, when asked for.
    pub logprobs: Vec<f32>,
    /// Logits after the prompt.
    pub prompt_logits: Vec<f32>,
}

/// Prefill chunk used by [`generate`].
const PREFILL_CHUNK: usize = 512;

/// Pages needed for `positions` positions.
pub fn pages_for(engine: &Engine, positions: usize) -> usize {
    positions.div_ceil(engine.kv_layout().block_size.get())
}

/// Generates from `prompt` until a stop token, a stop string or `max_tokens`.
pub fn generate(
    engine: &mut Engine,
    prompt: &[TokenId],
    params: &SamplingParams,
) -> Result<Generation, EngineError> {
    if prompt.is_empty() {
        return Err(EngineError::InvalidStep("empty prompt".into()));
    }
    let total = prompt.len() + params.max_tokens;
    let need = pages_for(engine, total);
    if need > engine.num_pages() {
        return Err(EngineError::InvalidStep(format!(
            "{total} positions need {need} pages, pool has {}",
            engine.num_pages()
        )));
    }
    let pages: Vec<PageId> = (0..need as u32).map(PageId).collect();
    let mut logits = Vec::new();
    for (i, chunk) in prompt.chunks(PREFILL_CHUNK).enumerate() {
        let item = StepItem {
            tokens: chunk,
            start_pos: i * PREFILL_CHUNK,
            pages: &pages,
        };
        logits = engine.step(&[item])?.pop().unwrap_or_default();
    }
    let prompt_logits = logits.clone();
    let mut sampler = Sampler::new(params);
    let eos = engine.tokenizer().eos_tokens().to_vec();
    let mut tokens = Vec::new();
    let mut logprobs = Vec::new();
    while tokens.len() < params.max_tokens {
        let (next, lp) = sampler.sample_with_logprob(&logits);
        if eos.contains(&next) {
            break;
        }
        tokens.push(next);
        logprobs.push(lp);
        if !params.stop.is_empty() {
            let partial = engine.tokenizer().decode(&tokens)?;
            if find_stop(&partial, &params.stop).is_some() {
                break;
            }
        }
        if tokens.len() == params.max_tokens {
            break;
        }
        let item = StepItem {
            tokens: std::slice::from_ref(&next),
            start_pos: prompt.len() + tokens.len() - 1,
            pages: &pages,
        };
        logits = engine.step(&[item])?.pop().unwrap_or_default();
    }
    let mut text = engine.tokenizer().decode(&tokens)?;
    if let Some(cut) = find_stop(&text, &params.stop) {
        text.truncate(cut);
    }
    if !params.logprobs {
        logprobs.clear();
    }
    Ok(Generation {
        tokens,
        text,
        logprobs,
        prompt_logits,
    })
}

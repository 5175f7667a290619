//! Sampling fields to [`SamplingParams`], checked against the prompt and the model's
//! limits: a generation request's, and the one-token greedy prefill a prefill replica
//! runs for `POST /v1/kv/prefill`.

use crate::server::error::ApiError;
use warmpath_engine::sampling::SamplingParams;
use warmpath_protocol::openai::SamplingFields;

/// Validates sampling fields against the prompt and the model's limits.
pub fn sampling_params(
    f: &SamplingFields,
    prompt_len: usize,
    max_context: usize,
    pool_tokens: usize,
) -> Result<SamplingParams, ApiError> {
    if prompt_len == 0 {
        return Err(ApiError::InvalidParam {
            param: "prompt",
            message: "the prompt is empty".into(),
        });
    }
    if prompt_len >= max_context {
        return Err(ApiError::ContextExceeded {
            max_context,
            prompt: prompt_len,
            requested: prompt_len + 1,
        });
    }
    let room = max_context - prompt_len;
    let max_tokens = match f.max_completion_tokens.or(f.max_tokens) {
        None => room,
        Some(0) => {
            return Err(ApiError::InvalidParam {
                param: "max_tokens",
                message: "max_tokens must be at least 1".into(),
            })
        }
        Some(n) if n as usize > room => {
            return Err(ApiError::InvalidParam {
                param: "max_tokens",
                message: format!(
                    "max_tokens ({n}) plus the prompt ({prompt_len} tokens) exceeds the context window of {max_context} tokens"
                ),
            })
        }
        Some(n) => n as usize,
    };
    // The whole sequence must fit the KV pool at once (one page of slack for the tail).
    if prompt_len + max_tokens > pool_tokens {
        return Err(ApiError::Capacity {
            needed: prompt_len + max_tokens,
            total: pool_tokens,
        });
    }
    let temperature = f.temperature.unwrap_or(1.0);
    if !(0.0..=2.0).contains(&temperature) {
        return Err(ApiError::InvalidParam {
            param: "temperature",
            message: format!("temperature must be between 0 and 2, got {temperature}"),
        });
    }
    let top_p = f.top_p.unwrap_or(1.0);
    if !(top_p > 0.0 && top_p <= 1.0) {
        return Err(ApiError::InvalidParam {
            param: "top_p",
            message: format!("top_p must be in (0, 1], got {top_p}"),
        });
    }
    let stop = f.stop.as_ref().map(|s| s.to_vec()).unwrap_or_default();
    if stop.iter().any(String::is_empty) {
        return Err(ApiError::InvalidParam {
            param: "stop",
            message: "stop strings must not be empty".into(),
        });
    }
    Ok(SamplingParams {
        temperature,
        top_k: f.top_k.unwrap_or(0) as usize,
        top_p,
        seed: f.seed,
        max_tokens,
        stop,
        logprobs: false,
    })
}

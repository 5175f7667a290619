//! `replica generate`: runs one prompt and prints the continuation.

use super::ModelArg;
use clap::Args;
use serde::Serialize;
use warmpath_engine::generate::generate;
use warmpath_engine::sampling::SamplingParams;
use warmpath_engine::{Engine, EngineOptions};
use warmpath_text::ChatMessage;

/// Upper bound on the bytes a chat template adds around one user message.
const CHAT_OVERHEAD_BYTES: usize = 1024;

/// Arguments of `replica generate`.
#[derive(Args, Debug)]
pub struct GenerateArgs {
    #[command(flatten)]
    model: ModelArg,
    /// Prompt text.
    #[arg(long)]
    prompt: String,
    /// Wrap the prompt as one user message with the model's chat template.
    #[arg(long)]
    chat: bool,
    /// Maximum new tokens.
    #[arg(long, default_value_t = 64)]
    max_tokens: usize,
    /// Sampling temperature (0 = greedy).
    #[arg(long, default_value_t = 0.0)]
    temperature: f32,
    /// Top-k (0 = off).
    #[arg(long, default_value_t = 0)]
    top_k: usize,
    /// Top-p (1 = off).
    #[arg(long, default_value_t = 1.0)]
    top_p: f32,
    /// Sampling seed.
    #[arg(long)]
    seed: Option<u64>,
    /// Stop strings.
    #[arg(long)]
    stop: Vec<String>,
    /// Print `{"prompt_tokens":[...],"tokens":[...],"text":"..."}`.
    #[arg(long)]
    json: bool,
}

#[derive(Serialize)]
struct Output {
    prompt_tokens: Vec<u32>,
    tokens: Vec<u32>,
    text: String,
}

/// Runs the subcommand, returning what to print.
pub fn run(args: &GenerateArgs) -> anyhow::Result<String> {
    // A token covers at least one byte, so the rendered prompt's byte length (plus the
    // chat template's few hundred bytes) bounds the prompt's token count.
    let bound = args.prompt.len() + CHAT_OVERHEAD_BYTES + args.max_tokens;
    let opts = EngineOptions {
        threads: args.model.threads,
        ..EngineOptions::default()
    };
    let kv_pages = bound.div_ceil(opts.block_size.get());
    let mut engine = Engine::load(&args.model.source(), &EngineOptions { kv_pages, ..opts })?;
    let tok = engine.tokenizer().clone();
    let prompt = if args.chat {
        tok.encode_chat(&[ChatMessage::new("user", args.prompt.clone())])?
    } else {
        tok.encode(&args.prompt, true)?
    };
    let params = SamplingParams {
        temperature: args.temperature,
        top_k: args.top_k,
        top_p: args.top_p,
        seed: args.seed,
        max_tokens: args.max_tokens,
        stop: args.stop.clone(),
        logprobs: false,
    };
    let g = generate(&mut engine, &prompt, &params)?;
    if args.json {
        Ok(serde_json::to_string(&Output {
            prompt_tokens: prompt.iter().map(|t| t.0).collect(),
            tokens: g.tokens.iter().map(|t| t.0).collect(),
            text: g.text,
        })?)
    } else {
        Ok(g.text)
    }
}

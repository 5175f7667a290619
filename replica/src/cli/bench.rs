//! `replica bench`: prefill and single-stream decode throughput of the engine.

use super::ModelArg;
use clap::Args;
use serde::Serialize;
use std::time::Instant;
use warmpath_core::TokenId;
use warmpath_engine::{Engine, EngineOptions, PageId, StepItem};

/// Arguments of `replica bench`.
#[derive(Args, Debug)]
pub struct BenchArgs {
    #[command(flatten)]
    model: ModelArg,
    /// Prompt length for the prefill measurement.
    #[arg(long, default_value_t = 512)]
    prompt_tokens: usize,
    /// Tokens generated for the decode measurement.
    #[arg(long, default_value_t = 128)]
    decode_tokens: usize,
    /// Prefill repetitions (the best is reported).
    #[arg(long, default_value_t = 3)]
    reps: usize,
    /// Print JSON instead of text.
    #[arg(long)]
    json: bool,
}

/// Measured throughput.
#[derive(Debug, Serialize)]
pub struct BenchResult {
    /// Checkpoint measured.
    pub checkpoint: String,
    /// Worker threads.
    pub threads: usize,
    /// Prompt length.
    pub prompt_tokens: usize,
    /// Best prefill throughput, tokens/s.
    pub prefill_tok_s: f64,
    /// Decode tokens timed.
    pub decode_tokens: usize,
    /// Single-stream decode throughput, tokens/s.
    pub decode_tok_s: f64,
}

/// Runs the benchmark.
pub fn run(args: &BenchArgs) -> anyhow::Result<String> {
    let opts = EngineOptions {
        threads: args.model.threads,
        ..EngineOptions::default()
    };
    let total = args.prompt_tokens + args.decode_tokens;
    let kv_pages = total.div_ceil(opts.block_size.get());
    let mut engine = Engine::load(&args.model.source(), &EngineOptions { kv_pages, ..opts })?;
    let vocab = engine.config().vocab_size as u32;
    // Deterministic, varied prompt ids (content does not change the cost).
    let prompt: Vec<TokenId> = (0..args.prompt_tokens as u32)
        .map(|i| TokenId((i.wrapping_mul(2_654_435_761) >> 7) % vocab))
        .collect();
    let pages: Vec<PageId> = (0..kv_pages as u32).map(PageId).collect();
    let mut best = f64::MAX;
    let mut logits = Vec::new();
    for _ in 0..args.reps.max(1) {
        let t0 = Instant::now();
        logits = engine.step(&[StepItem {
            tokens: &prompt,
            start_pos: 0,
            pages: &pages,
        }])?;
        best = best.min(t0.elapsed().as_secs_f64());
    }
    let mut next = TokenId(warmpath_engine::sampling::argmax(&logits[0]) as u32);
    let t0 = Instant::now();
    for i in 0..args.decode_tokens {
        let l = engine.step(&[StepItem {
            tokens: std::slice::from_ref(&next),
            start_pos: args.prompt_tokens + i,
            pages: &pages,
        }])?;
        next = TokenId(warmpath_engine::sampling::argmax(&l[0]) as u32);
    }
    let decode_s = t0.elapsed().as_secs_f64();
    let threads = if args.model.threads == 0 {
        std::thread::available_parallelism().map_or(1, |n| n.get())
    } else {
        args.model.threads
    };
    let r = BenchResult {
        checkpoint: engine.checkpoint().to_string(),
        threads,
        prompt_tokens: args.prompt_tokens,
        prefill_tok_s: args.prompt_tokens as f64 / best,
        decode_tokens: args.decode_tokens,
        decode_tok_s: args.decode_tokens as f64 / decode_s,
    };
    if args.json {
        Ok(serde_json::to_string(&r)?)
    } else {
        Ok(format!(
            "{}: threads {}, prefill {} tokens: {:.1} tok/s, decode {} tokens: {:.1} tok/s",
            r.checkpoint,
            r.threads,
            r.prompt_tokens,
            r.prefill_tok_s,
            r.decode_tokens,
            r.decode_tok_s
        ))
    }
}

#![allow(clippy::unwrap_used)]
//! Engine-level step benchmark on the default model (SmolLM2-135M Q4_1, CPU), without
//! HTTP or the scheduler, so the figures show what the forward pass itself costs:
//!
//! * prefill of a 512-token prompt (one step, best of 3);
//! * single-stream decode (one token per step) vs 16 streams decoding together (one step
//!   of 16 single-token items), measured alternately in the same process; greedy
//!   sampling of every row is included, as the server does it.
//!
//! `cargo bench -p replica --bench engine_step -- [--threads N] [--rounds R] [--steps S]
//! [--only-batch]` (`--only-batch` runs just the 16-stream decode, for `perf record`).

use std::time::Instant;
use warmpath_core::TokenId;
use warmpath_engine::sampling::{Sampler, SamplingParams};
use warmpath_engine::{Engine, EngineOptions, ModelSource, PageId, StepItem};

const STREAMS: usize = 16;
const PROMPT: usize = 8;

fn arg(name: &str, default: usize) -> usize {
    std::env::args()
        .skip_while(|a| a != name)
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(default)
}

fn prompt(seed: u32, n: usize, vocab: u32) -> Vec<TokenId> {
    (0..n as u32)
        .map(|i| TokenId((i.wrapping_mul(2_654_435_761) ^ seed.wrapping_mul(40_503)) % vocab))
        .collect()
}

/// `n` streams: prefilled with distinct prompts, then `steps` decode steps with all of
/// them in every step; returns decode tokens/s (sampling included).
fn decode(engine: &mut Engine, n: usize, steps: usize, per_seq_pages: usize) -> f64 {
    let vocab = engine.config().vocab_size as u32;
    let pages: Vec<Vec<PageId>> = (0..n)
        .map(|s| {
            (s * per_seq_pages..(s + 1) * per_seq_pages)
                .map(|p| PageId(p as u32))
                .collect()
        })
        .collect();
    let prompts: Vec<Vec<TokenId>> = (0..n)
        .map(|s| prompt(s as u32 + 1, PROMPT, vocab))
        .collect();
    let items: Vec<StepItem<'_>> = (0..n)
        .map(|s| StepItem {
            tokens: &prompts[s],
            start_pos: 0,
            pages: &pages[s],
        })
        .collect();
    let logits = engine.step(&items).unwrap();
    let mut samplers: Vec<Sampler> = (0..n)
        .map(|_| Sampler::new(&SamplingParams::default()))
        .collect();
    let mut next: Vec<TokenId> = samplers
        .iter_mut()
        .zip(&logits)
        .map(|(s, l)| s.sample(l))
        .collect();
    let t0 = Instant::now();
    for step in 0..steps {
        let items: Vec<StepItem<'_>> = (0..n)
            .map(|s| StepItem {
                tokens: std::slice::from_ref(&next[s]),
                start_pos: PROMPT + step,
                pages: &pages[s],
            })
            .collect();
        let logits = engine.step(&items).unwrap();
        for ((t, s), l) in next.iter_mut().zip(&mut samplers).zip(&logits) {
            *t = s.sample(l);
        }
    }
    (n * steps) as f64 / t0.elapsed().as_secs_f64()
}

fn main() {
    let threads = arg("--threads", 0);
    let rounds = arg("--rounds", 3);
    let steps = arg("--steps", 128);
    let only_batch = std::env::args().any(|a| a == "--only-batch");
    let block = 16;
    let per_seq_pages = (PROMPT + steps)
        .div_ceil(block)
        .max(512usize.div_ceil(block) + 1);
    let opts = EngineOptions {
        kv_pages: STREAMS * per_seq_pages,
        threads,
        ..EngineOptions::default()
    };
    let mut engine = Engine::load(&ModelSource::Default, &opts).unwrap();
    println!(
        "model {}, threads {threads}, steps {steps}",
        engine.checkpoint()
    );
    if only_batch {
        for _ in 0..rounds {
            println!(
                "decode_tok_s_16 {:.1}",
                decode(&mut engine, STREAMS, steps, per_seq_pages)
            );
        }
        return;
    }
    let vocab = engine.config().vocab_size as u32;
    let long = prompt(7, 512, vocab);
    let pages: Vec<PageId> = (0..per_seq_pages as u32).map(PageId).collect();
    let mut best = f64::MAX;
    for _ in 0..3 {
        let t0 = Instant::now();
        engine
            .step(&[StepItem {
                tokens: &long,
                start_pos: 0,
                pages: &pages,
            }])
            .unwrap();
        best = best.min(t0.elapsed().as_secs_f64());
    }
    println!("prefill_512_tok_s {:.1}", 512.0 / best);
    decode(&mut engine, 1, 8, per_seq_pages); // warm-up
    for r in 0..rounds {
        let one = decode(&mut engine, 1, steps, per_seq_pages);
        let many = decode(&mut engine, STREAMS, steps, per_seq_pages);
        println!(
            "round {r}: decode_tok_s_1 {one:.1} decode_tok_s_16 {many:.1} scaling {:.2}x",
            many / one
        );
    }
}

#![allow(clippy::unwrap_used)]
//! Ragged batching and chunked prefill give the same logits as running each sequence
//! alone in one shot (dummy:tiny and dummy:smollm2-135m, real forward passes).

use warmpath_core::{BlockSize, TokenId};
use warmpath_engine::{Engine, EngineOptions, ModelSource, PageId, StepItem};

fn engine(name: &str, pages: usize, block: u32) -> Engine {
    let opts = EngineOptions {
        kv_pages: pages,
        block_size: BlockSize(block),
        threads: 2,
    };
    Engine::load(&ModelSource::Dummy(name.into()), &opts).expect("load dummy")
}

fn toks(seed: u32, n: usize, vocab: usize) -> Vec<TokenId> {
    (0..n as u32)
        .map(|i| TokenId((i.wrapping_mul(2_654_435_761) ^ seed.wrapping_mul(40503)) % vocab as u32))
        .collect()
}

fn rel_err(a: &[f32], b: &[f32]) -> f32 {
    let num: f32 = a.iter().zip(b).map(|(x, y)| (x - y) * (x - y)).sum();
    let den: f32 = b.iter().map(|y| y * y).sum();
    (num / den.max(1e-30)).sqrt()
}

fn pages(from: u32, n: u32) -> Vec<PageId> {
    (from..from + n).map(PageId).collect()
}

/// Runs one sequence alone: one-shot prefill of `prompt`, then the given decode tokens;
/// returns the logits after the prompt and after each decode token.
fn alone(name: &str, block: u32, prompt: &[TokenId], decode: &[TokenId]) -> Vec<Vec<f32>> {
    let mut e = engine(name, 64, block);
    let p = pages(0, 64);
    let mut out = e
        .step(&[StepItem {
            tokens: prompt,
            start_pos: 0,
            pages: &p,
        }])
        .expect("prefill");
    for (i, t) in decode.iter().enumerate() {
        let l = e
            .step(&[StepItem {
                tokens: std::slice::from_ref(t),
                start_pos: prompt.len() + i,
                pages: &p,
            }])
            .expect("decode");
        out.extend(l);
    }
    out
}

fn check_mixed_batch(name: &str, block: u32) {
    let vocab = engine(name, 1, block).config().vocab_size;
    let a = toks(1, 37, vocab); // prefilled in two chunks inside batches
    let b = toks(2, 20, vocab); // prefilled alone first, then decodes in the batch
    let c = toks(3, 5, vocab); // one-shot prefill inside the batch
    let b_dec = toks(4, 2, vocab);

    let ref_a = alone(name, block, &a, &[]);
    let ref_b = alone(name, block, &b, &b_dec);
    let ref_c = alone(name, block, &c, &[]);

    // Every sequence stays under 40 positions.
    let per = 40u32.div_ceil(block);
    let mut e = engine(name, 3 * per as usize, block);
    let (pa, pb, pc) = (pages(0, per), pages(per, per), pages(2 * per, per));
    let l = e
        .step(&[StepItem {
            tokens: &b,
            start_pos: 0,
            pages: &pb,
        }])
        .expect("b prefill");
    assert!(rel_err(&l[0], &ref_b[0]) < 1e-4);
    // Step 1: a's first chunk + b's first decode token.
    let l = e
        .step(&[
            StepItem {
                tokens: &a[..23],
                start_pos: 0,
                pages: &pa,
            },
            StepItem {
                tokens: &b_dec[..1],
                start_pos: b.len(),
                pages: &pb,
            },
        ])
        .expect("step 1");
    assert_eq!(l.len(), 2);
    assert_eq!(l[0].len(), vocab);
    let err_b1 = rel_err(&l[1], &ref_b[1]);
    assert!(err_b1 < 1e-4, "{name}: decode in batch vs alone: {err_b1}");
    // Step 2: a's second chunk + b's second decode + c's whole prompt.
    let l = e
        .step(&[
            StepItem {
                tokens: &a[23..],
                start_pos: 23,
                pages: &pa,
            },
            StepItem {
                tokens: &b_dec[1..],
                start_pos: b.len() + 1,
                pages: &pb,
            },
            StepItem {
                tokens: &c,
                start_pos: 0,
                pages: &pc,
            },
        ])
        .expect("step 2");
    let (ea, eb, ec) = (
        rel_err(&l[0], &ref_a[0]),
        rel_err(&l[1], &ref_b[2]),
        rel_err(&l[2], &ref_c[0]),
    );
    assert!(
        ea < 1e-4,
        "{name}: chunked prefill in batch vs one-shot: {ea}"
    );
    assert!(eb < 1e-4, "{name}: decode: {eb}");
    assert!(ec < 1e-4, "{name}: prefill in batch: {ec}");
    // Sanity: different sequences really give different logits.
    assert!(rel_err(&l[0], &l[2]) > 1e-3);
}

#[test]
fn tiny_mixed_batch_matches_sequences_alone() {
    check_mixed_batch("tiny", 16);
    check_mixed_batch("tiny", 1);
    check_mixed_batch("tiny", 7);
}

#[test]
fn smollm2_shaped_quantised_batch_matches_alone() {
    check_mixed_batch("smollm2-135m", 16);
}

#[test]
fn chunked_prefill_equals_one_shot() {
    let mut e = engine("tiny", 16, 16);
    let vocab = e.config().vocab_size;
    let prompt = toks(9, 50, vocab);
    let p = pages(0, 4);
    let one = e
        .step(&[StepItem {
            tokens: &prompt,
            start_pos: 0,
            pages: &p,
        }])
        .expect("one shot");
    let q = pages(4, 4);
    let mut last = Vec::new();
    for (start, end) in [(0, 1), (1, 17), (17, 32), (32, 50)] {
        last = e
            .step(&[StepItem {
                tokens: &prompt[start..end],
                start_pos: start,
                pages: &q,
            }])
            .expect("chunk");
    }
    let err = rel_err(&last[0], &one[0]);
    assert!(err < 1e-4, "chunked vs one-shot: {err}");
}

#[test]
fn shared_prefix_pages_are_reused() {
    // Sequence B reuses A's first full page (as the radix cache would) and only computes
    // its own suffix; logits equal computing B from scratch.
    let mut e = engine("tiny", 16, 8);
    let vocab = e.config().vocab_size;
    let a = toks(5, 12, vocab);
    let mut b = a[..8].to_vec();
    b.extend(toks(6, 6, vocab));
    e.step(&[StepItem {
        tokens: &a,
        start_pos: 0,
        pages: &[PageId(0), PageId(1)],
    }])
    .expect("a");
    let shared = e
        .step(&[StepItem {
            tokens: &b[8..],
            start_pos: 8,
            pages: &[PageId(0), PageId(2)],
        }])
        .expect("b suffix");
    let fresh = e
        .step(&[StepItem {
            tokens: &b,
            start_pos: 0,
            pages: &[PageId(3), PageId(4)],
        }])
        .expect("b fresh");
    assert!(rel_err(&shared[0], &fresh[0]) < 1e-4);
}

#[test]
fn invalid_steps_are_rejected() {
    let mut e = engine("tiny", 4, 16);
    let t = [TokenId(1); 20];
    let err = e
        .step(&[StepItem {
            tokens: &t,
            start_pos: 0,
            pages: &[PageId(0)],
        }])
        .expect_err("too few pages");
    assert!(err.to_string().contains("pages"), "{err}");
    let err = e
        .step(&[StepItem {
            tokens: &t[..1],
            start_pos: 0,
            pages: &[PageId(9)],
        }])
        .expect_err("page out of range");
    assert!(err.to_string().contains("out of range"), "{err}");
    let err = e
        .step(&[StepItem {
            tokens: &[TokenId(100_000)],
            start_pos: 0,
            pages: &[PageId(0)],
        }])
        .expect_err("bad token");
    assert!(err.to_string().contains("vocabulary"), "{err}");
}

#[test]
fn dummy_identity_and_layout() {
    let e = engine("tiny", 8, 16);
    assert_eq!(e.checkpoint().as_str(), "dummy:tiny@0");
    assert_eq!(e.num_pages(), 8);
    let l = e.kv_layout();
    assert_eq!(l.block_size, BlockSize(16));
    let c = e.config();
    assert_eq!(
        l.bytes_per_page(),
        c.n_layers * 2 * 16 * c.n_kv_heads * c.head_dim * 2,
        "the CPU pool stores f16"
    );
    let ids = e
        .tokenizer()
        .encode("héllo <|im_end|>", false)
        .expect("encode");
    assert_eq!(
        e.tokenizer().decode(&ids).expect("decode"),
        "héllo <|im_end|>"
    );
    assert!(ids.contains(&TokenId(258)));
}

//! `dummy:NAME` models: real architectures with seeded random weights and a byte-level
//! tokenizer, for benchmarks, tests and GPU checks where no model file is available.

use super::config::{ModelConfig, RopeStyle};
use super::matrix::{Bytes, Matrix};
use super::quant::{quantize_row, QuantKind};
use super::weights::{LayerWeights, ModelWeights};
use crate::error::EngineError;
use warmpath_core::rng::{Draw, SeedableRng, SplitMix64};
use warmpath_text::bytelevel::byte_level_spec;
use warmpath_text::TokenizerSpec;

/// A dummy model: config, weights and tokenizer.
pub(crate) struct DummyModel {
    pub(crate) config: ModelConfig,
    pub(crate) weights: ModelWeights,
    pub(crate) tokenizer: TokenizerSpec,
    pub(crate) seed: u64,
}

/// Uniform in `[-a, a)`.
fn sym(rng: &mut SplitMix64, a: f32) -> f32 {
    (rng.next_f32() * 2.0 - 1.0) * a
}

/// The architecture behind a dummy name, and whether its matrices are quantised.
fn dummy_config(name: &str) -> Result<(ModelConfig, Option<QuantKind>), EngineError> {
    match name {
        "tiny" => Ok((
            ModelConfig {
                name: "dummy-tiny".into(),
                n_layers: 2,
                dim: 64,
                n_heads: 4,
                n_kv_heads: 2,
                head_dim: 16,
                ffn_dim: 128,
                vocab_size: 320,
                max_context: 4096,
                rope_theta: 10_000.0,
                rope_freq_scale: 1.0,
                rope_style: RopeStyle::Half,
                rms_eps: 1e-5,
            },
            None,
        )),
        "smollm2-135m" => Ok((
            ModelConfig {
                name: "dummy-smollm2-135m".into(),
                n_layers: 30,
                dim: 576,
                n_heads: 9,
                n_kv_heads: 3,
                head_dim: 64,
                ffn_dim: 1536,
                vocab_size: 49_152,
                max_context: 8192,
                rope_theta: 100_000.0,
                rope_freq_scale: 1.0,
                rope_style: RopeStyle::Interleaved,
                rms_eps: 1e-5,
            },
            Some(QuantKind::Q4_1),
        )),
        // Llama-3.2-1B's shape (about 1.2B parameters), for GPU checks. (owner: cuda)
        "llama-1b" => Ok((
            ModelConfig {
                name: "dummy-llama-1b".into(),
                n_layers: 16,
                dim: 2048,
                n_heads: 32,
                n_kv_heads: 8,
                head_dim: 64,
                ffn_dim: 8192,
                vocab_size: 128_256,
                max_context: 8192,
                rope_theta: 500_000.0,
                rope_freq_scale: 1.0,
                rope_style: RopeStyle::Half,
                rms_eps: 1e-5,
            },
            Some(QuantKind::Q4_1),
        )),
        other => Err(EngineError::UnknownDummy(other.to_string())),
    }
}

/// Builds `dummy:NAME` (optionally `NAME@SEED`).
pub(crate) fn build(spec: &str) -> Result<DummyModel, EngineError> {
    let (name, seed) = match spec.split_once('@') {
        Some((n, s)) => (
            n,
            s.parse::<u64>()
                .map_err(|_| EngineError::UnknownDummy(spec.to_string()))?,
        ),
        None => (spec, 0),
    };
    let (config, quant) = dummy_config(name)?;
    let mut rng = SplitMix64::seed_from_u64(seed ^ 0x5eed);
    let mut mat = |rows: usize, cols: usize, scale: f32| {
        let w: Vec<f32> = (0..rows * cols).map(|_| sym(&mut rng, scale)).collect();
        match quant {
            None => Matrix::F32 { w, rows, cols },
            Some(kind) => {
                let mut bytes = Vec::with_capacity(kind.row_bytes(cols) * rows);
                quantize_row(kind, &w, &mut bytes);
                Matrix::Quant {
                    kind,
                    bytes: Bytes::Owned(bytes),
                    rows,
                    cols,
                }
            }
        }
    };
    let c = &config;
    let (d, q, kv, f) = (c.dim, c.q_dim(), c.kv_dim(), c.ffn_dim);
    let s_in = |n: usize| 1.0 / (n as f32).sqrt();
    let token_embd = mat(c.vocab_size, d, 1.0);
    let mut layers = Vec::with_capacity(c.n_layers);
    for _ in 0..c.n_layers {
        layers.push(LayerWeights {
            attn_norm: vec![1.0; d],
            wq: mat(q, d, s_in(d)),
            wk: mat(kv, d, s_in(d)),
            wv: mat(kv, d, s_in(d)),
            wo: mat(d, q, s_in(q)),
            ffn_norm: vec![1.0; d],
            w_gate: mat(f, d, s_in(d)),
            w_up: mat(f, d, s_in(d)),
            w_down: mat(d, f, s_in(f)),
        });
    }
    let weights = ModelWeights {
        token_embd,
        layers,
        output_norm: vec![1.0; d],
        output: None,
    };
    let tokenizer = byte_level_spec(config.vocab_size);
    Ok(DummyModel {
        config,
        weights,
        tokenizer,
        seed,
    })
}

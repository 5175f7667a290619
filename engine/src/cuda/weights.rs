//! Weights on the device: every matrix dequantised to f16 at load (GEMMs accumulate in
//! f32), the query/key/value projections stacked into one matrix and the SwiGLU gate/up
//! pair into another, so each needs a single GEMM per layer.

use super::err::DevErr;
use crate::config::ModelConfig;
use crate::error::EngineError;
use crate::matrix::Matrix;
use crate::weights::{LayerWeights, ModelWeights};
use cudarc::driver::{CudaSlice, CudaStream};
use half::f16;
use rayon::prelude::*;
use std::sync::Arc;

/// An f16 matrix on the device, row-major `rows x cols` (values as raw f16 bits).
pub(crate) struct DevMatrix {
    pub(crate) data: CudaSlice<u16>,
    pub(crate) rows: usize,
    pub(crate) cols: usize,
}

/// One transformer block on the device.
pub(crate) struct DevLayer {
    pub(crate) attn_norm: CudaSlice<f32>,
    pub(crate) ffn_norm: CudaSlice<f32>,
    /// `[wq; wk; wv]`: `q_dim + 2 kv_dim` rows.
    pub(crate) wqkv: DevMatrix,
    pub(crate) wo: DevMatrix,
    /// `[w_gate; w_up]`: `2 ffn_dim` rows.
    pub(crate) wgu: DevMatrix,
    pub(crate) w_down: DevMatrix,
}

/// All weights on the device.
pub(crate) struct DevWeights {
    /// Token embeddings (`vocab x dim`), also the head when tied.
    pub(crate) embd: DevMatrix,
    /// Untied output head.
    pub(crate) output: Option<DevMatrix>,
    pub(crate) output_norm: CudaSlice<f32>,
    pub(crate) layers: Vec<DevLayer>,
}

impl DevWeights {
    /// The output head (tied or not).
    pub(crate) fn head(&self) -> &DevMatrix {
        self.output.as_ref().unwrap_or(&self.embd)
    }
}

/// Dequantises `mats` (same column count) into one row-major f16 matrix, rows of the
/// first matrix first.
pub(crate) fn pack_f16(mats: &[&Matrix]) -> Vec<u16> {
    let cols = mats.first().map_or(0, |m| m.cols());
    let rows: usize = mats.iter().map(|m| m.rows()).sum();
    let mut out = vec![0u16; rows * cols];
    let mut rest = out.as_mut_slice();
    for m in mats {
        debug_assert_eq!(m.cols(), cols);
        let (part, tail) = rest.split_at_mut(m.rows() * cols);
        part.par_chunks_mut(cols.max(1)).enumerate().for_each_init(
            || vec![0.0f32; cols],
            |tmp, (r, o)| {
                m.row_f32(r, tmp);
                for (d, &v) in o.iter_mut().zip(tmp.iter()) {
                    *d = f16::from_f32(v).to_bits();
                }
            },
        );
        rest = tail;
    }
    out
}

/// Every matrix of `w` as dense f32 (the exact CPU reference of a quantised model).
pub fn dequantize_all(w: ModelWeights) -> ModelWeights {
    let dense = |m: Matrix| match m {
        Matrix::F32 { .. } => m,
        Matrix::Quant { rows, cols, .. } => {
            let mut out = vec![0.0f32; rows * cols];
            out.par_chunks_mut(cols.max(1))
                .enumerate()
                .for_each(|(r, o)| m.row_f32(r, o));
            Matrix::F32 { w: out, rows, cols }
        }
    };
    ModelWeights {
        token_embd: dense(w.token_embd),
        layers: w
            .layers
            .into_iter()
            .map(|l| LayerWeights {
                attn_norm: l.attn_norm,
                wq: dense(l.wq),
                wk: dense(l.wk),
                wv: dense(l.wv),
                wo: dense(l.wo),
                ffn_norm: l.ffn_norm,
                w_gate: dense(l.w_gate),
                w_up: dense(l.w_up),
                w_down: dense(l.w_down),
            })
            .collect(),
        output_norm: w.output_norm,
        output: w.output.map(dense),
    }
}

/// Bytes of device weights one decode step reads: every layer's matrices and the head
/// (the embedding lookup reads only the step's rows), in f16, plus the norm vectors.
pub fn weight_bytes_per_step(cfg: &ModelConfig) -> u64 {
    let (d, q, kv, f) = (cfg.dim, cfg.q_dim(), cfg.kv_dim(), cfg.ffn_dim);
    let per_layer = d * (q + 2 * kv) + q * d + 2 * f * d + f * d;
    let matrices = cfg.n_layers * per_layer + cfg.vocab_size * d;
    let norms = (2 * cfg.n_layers + 1) * d;
    (matrices * 2 + norms * 4) as u64
}

fn upload(stream: &Arc<CudaStream>, mats: &[&Matrix]) -> Result<DevMatrix, EngineError> {
    let host = pack_f16(mats);
    Ok(DevMatrix {
        data: stream.clone_htod(&host).dev("upload weights")?,
        rows: mats.iter().map(|m| m.rows()).sum(),
        cols: mats[0].cols(),
    })
}

/// Uploads `w` (shapes already validated against `cfg`), one matrix at a time so host
/// memory holds at most one f16 copy.
pub(crate) fn upload_weights(
    stream: &Arc<CudaStream>,
    cfg: &ModelConfig,
    w: &ModelWeights,
) -> Result<DevWeights, EngineError> {
    let vec = |v: &[f32]| stream.clone_htod(v).dev("upload norm weights");
    let mut layers = Vec::with_capacity(cfg.n_layers);
    for l in &w.layers {
        layers.push(DevLayer {
            attn_norm: vec(&l.attn_norm)?,
            ffn_norm: vec(&l.ffn_norm)?,
            wqkv: upload(stream, &[&l.wq, &l.wk, &l.wv])?,
            wo: upload(stream, &[&l.wo])?,
            wgu: upload(stream, &[&l.w_gate, &l.w_up])?,
            w_down: upload(stream, &[&l.w_down])?,
        });
    }
    Ok(DevWeights {
        embd: upload(stream, &[&w.token_embd])?,
        output: w
            .output
            .as_ref()
            .map(|o| upload(stream, &[o]))
            .transpose()?,
        output_norm: vec(&w.output_norm)?,
        layers,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::matrix::Bytes;
    use crate::quant::{quantize_row, QuantKind};

    fn dense(rows: usize, cols: usize, seed: f32) -> Matrix {
        Matrix::F32 {
            w: (0..rows * cols).map(|i| seed + i as f32 * 0.25).collect(),
            rows,
            cols,
        }
    }

    #[test]
    fn cuda_pack_stacks_rows_in_order_as_f16() {
        let (a, b) = (dense(2, 3, 0.0), dense(1, 3, 100.0));
        let packed = pack_f16(&[&a, &b]);
        let back: Vec<f32> = packed.iter().map(|&h| f16::from_bits(h).to_f32()).collect();
        assert_eq!(
            back,
            vec![0.0, 0.25, 0.5, 0.75, 1.0, 1.25, 100.0, 100.25, 100.5]
        );
    }

    #[test]
    fn cuda_pack_dequantises_block_formats() {
        let x: Vec<f32> = (0..64).map(|i| (i as f32 - 31.5) / 40.0).collect();
        let mut bytes = Vec::new();
        quantize_row(QuantKind::Q4_1, &x, &mut bytes);
        let m = Matrix::Quant {
            kind: QuantKind::Q4_1,
            bytes: Bytes::Owned(bytes),
            rows: 2,
            cols: 32,
        };
        let mut row = vec![0.0; 32];
        m.row_f32(1, &mut row);
        let packed = pack_f16(&[&m]);
        for (h, v) in packed[32..].iter().zip(&row) {
            let got = f16::from_bits(*h).to_f32();
            assert!((got - v).abs() <= v.abs() * 1e-3 + 1e-6, "{got} vs {v}");
        }
    }

    #[test]
    fn cuda_dequantize_all_keeps_values_and_shapes() {
        let x: Vec<f32> = (0..64).map(|i| (i as f32 - 20.0) / 30.0).collect();
        let mut bytes = Vec::new();
        quantize_row(QuantKind::Q8_0, &x, &mut bytes);
        let q = Matrix::Quant {
            kind: QuantKind::Q8_0,
            bytes: Bytes::Owned(bytes),
            rows: 2,
            cols: 32,
        };
        let mut want = vec![0.0; 32];
        q.row_f32(1, &mut want);
        let w = ModelWeights {
            token_embd: q,
            layers: Vec::new(),
            output_norm: vec![1.0; 32],
            output: Some(dense(3, 32, 0.5)),
        };
        let d = dequantize_all(w);
        match &d.token_embd {
            Matrix::F32 {
                w,
                rows: 2,
                cols: 32,
            } => assert_eq!(&w[32..], &want[..]),
            other => panic!("not dense 2x32: {other:?}"),
        }
        assert!(matches!(d.head(), Matrix::F32 { rows: 3, .. }));
    }

    #[test]
    fn cuda_weight_bytes_count_every_matrix_once() {
        let cfg = ModelConfig {
            name: "t".into(),
            n_layers: 2,
            dim: 8,
            n_heads: 2,
            n_kv_heads: 1,
            head_dim: 4,
            ffn_dim: 16,
            vocab_size: 10,
            max_context: 64,
            rope_theta: 1e4,
            rope_freq_scale: 1.0,
            rope_style: crate::RopeStyle::Half,
            rms_eps: 1e-5,
        };
        // Per layer: q 8x8, k 4x8, v 4x8, o 8x8, gate/up 2x16x8, down 8x16 = 576 values.
        let values = 2 * 576 + 10 * 8;
        assert_eq!(weight_bytes_per_step(&cfg), (values * 2 + 5 * 8 * 4) as u64);
    }
}

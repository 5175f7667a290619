//! The Llama forward pass over a ragged batch, on the CPU.
//!
//! All new tokens of all items are stacked into one `T x dim` activation matrix so every
//! weight row is read once per step; attention then runs per (token, head) against the
//! paged KV pool, causally within each sequence.

use super::attention::{attention, round_f16, Row};
use super::config::{ModelConfig, RopeStyle};
use super::kernels::{swiglu, with_simd};
use super::kv::KvPool;
use super::matrix::{Input, Matrix};
use super::weights::ModelWeights;
use crate::step::StepItem;
use rayon::prelude::*;

/// Scratch buffers for one step.
struct Acts {
    x: Vec<f32>,
    h: Vec<f32>,
    q: Vec<f32>,
    k: Vec<f32>,
    v: Vec<f32>,
    att: Vec<f32>,
    o: Vec<f32>,
    gate: Vec<f32>,
    up: Vec<f32>,
}

impl Acts {
    fn new(cfg: &ModelConfig, t: usize) -> Self {
        Self {
            x: vec![0.0; t * cfg.dim],
            h: vec![0.0; t * cfg.dim],
            q: vec![0.0; t * cfg.q_dim()],
            k: vec![0.0; t * cfg.kv_dim()],
            v: vec![0.0; t * cfg.kv_dim()],
            att: vec![0.0; t * cfg.q_dim()],
            o: vec![0.0; t * cfg.dim],
            gate: vec![0.0; t * cfg.ffn_dim],
            up: vec![0.0; t * cfg.ffn_dim],
        }
    }
}

/// Runs one step; returns the logits of each item's last new position. Items must have
/// been validated (non-empty, pages covering every position, ids in range).
pub(crate) fn forward(
    cfg: &ModelConfig,
    w: &ModelWeights,
    kv: &mut KvPool,
    items: &[StepItem<'_>],
) -> Vec<Vec<f32>> {
    let rows: Vec<Row<'_>> = items
        .iter()
        .flat_map(|it| {
            (0..it.tokens.len()).map(move |i| Row {
                pos: it.start_pos + i,
                pages: it.pages,
                single: it.tokens.len() == 1,
            })
        })
        .collect();
    let t = rows.len();
    let (dim, kvd) = (cfg.dim, cfg.kv_dim());
    let mut a = Acts::new(cfg, t);
    for (row, id) in
        a.x.chunks_exact_mut(dim)
            .zip(items.iter().flat_map(|it| it.tokens.iter()))
    {
        w.token_embd.row_f32(id.0 as usize, row);
    }
    let rope = RopeTable::new(cfg, &rows);
    for (l, lw) in w.layers.iter().enumerate() {
        rmsnorm_rows(&a.x, &lw.attn_norm, cfg.rms_eps, &mut a.h);
        let h = Input::new(&a.h, t);
        Matrix::matmul_prepared_many(
            &h,
            &mut [(&lw.wq, &mut a.q), (&lw.wk, &mut a.k), (&lw.wv, &mut a.v)],
        );
        // FMA instructions instead of `fmaf` calls (same bits: both round once).
        with_simd(
            #[inline(always)]
            || {
                rope.apply(cfg, &mut a.q, cfg.n_heads);
                rope.apply(cfg, &mut a.k, cfg.n_kv_heads);
            },
        );
        // The KV cache holds f16 values, as llama.cpp's default cache does.
        a.k.iter_mut()
            .chain(a.v.iter_mut())
            .for_each(|x| *x = round_f16(*x));
        for (i, r) in rows.iter().enumerate() {
            let (k, v) = (&a.k[i * kvd..(i + 1) * kvd], &a.v[i * kvd..(i + 1) * kvd]);
            kv.write(r.pages, l, r.pos, k, v);
        }
        attention(cfg, kv, l, &rows, &a.q, &mut a.att);
        lw.wo.matmul(&a.att, t, &mut a.o);
        add_into(&mut a.x, &a.o);
        rmsnorm_rows(&a.x, &lw.ffn_norm, cfg.rms_eps, &mut a.h);
        let h = Input::new(&a.h, t);
        Matrix::matmul_prepared_many(&h, &mut [(&lw.w_gate, &mut a.gate), (&lw.w_up, &mut a.up)]);
        a.gate
            .par_chunks_mut(cfg.ffn_dim)
            .zip(a.up.par_chunks(cfg.ffn_dim))
            .for_each(|(g, u)| swiglu(g, u));
        lw.w_down.matmul(&a.gate, t, &mut a.o);
        add_into(&mut a.x, &a.o);
    }
    // Final norm and head, only for each item's last position.
    let mut last = Vec::with_capacity(items.len() * dim);
    let mut end = 0;
    for it in items {
        end += it.tokens.len();
        last.extend_from_slice(&a.x[(end - 1) * dim..end * dim]);
    }
    let mut normed = vec![0.0; last.len()];
    rmsnorm_rows(&last, &w.output_norm, cfg.rms_eps, &mut normed);
    let head = w.head();
    let vocab = head.rows();
    let mut logits = vec![0.0; items.len() * vocab];
    head.matmul(&normed, items.len(), &mut logits);
    logits.chunks_exact(vocab).map(<[f32]>::to_vec).collect()
}

fn add_into(x: &mut [f32], y: &[f32]) {
    for (a, b) in x.iter_mut().zip(y) {
        *a += b;
    }
}

/// `out[r] = x[r] / rms(x[r]) * weight` for each row, rounded as ggml does (squares in
/// f32 summed in f64, mean and scale in f32, then `(x * scale) * weight`).
pub(crate) fn rmsnorm_rows(x: &[f32], weight: &[f32], eps: f32, out: &mut [f32]) {
    let d = weight.len();
    for (xr, or) in x.chunks_exact(d).zip(out.chunks_exact_mut(d)) {
        let ss: f64 = xr.iter().map(|&v| (v * v) as f64).sum();
        let mean = (ss / d as f64) as f32;
        let scale = 1.0f32 / (mean + eps).sqrt();
        for ((o, &v), &g) in or.iter_mut().zip(xr).zip(weight) {
            *o = (v * scale) * g;
        }
    }
}

/// cos/sin of every (row, frequency) pair of a step.
struct RopeTable {
    half: usize,
    cos: Vec<f32>,
    sin: Vec<f32>,
}

impl RopeTable {
    /// ggml's rope cache: `theta_scale = base^(-2/d)` in f32, `theta *= theta_scale` per
    /// pair, f32 `cos`/`sin` (same rounding as llama.cpp).
    fn new(cfg: &ModelConfig, rows: &[Row<'_>]) -> Self {
        let half = cfg.head_dim / 2;
        let theta_scale = cfg.rope_theta.powf(-2.0 / cfg.head_dim as f32);
        let mut cos = Vec::with_capacity(rows.len() * half);
        let mut sin = Vec::with_capacity(rows.len() * half);
        for r in rows {
            let mut theta = r.pos as f32;
            for _ in 0..half {
                let t = cfg.rope_freq_scale * theta;
                cos.push(t.cos());
                sin.push(t.sin());
                theta *= theta_scale;
            }
        }
        Self { half, cos, sin }
    }

    /// Rotates every head of every row of `x` (`rows x heads*head_dim`).
    #[inline(always)]
    fn apply(&self, cfg: &ModelConfig, x: &mut [f32], heads: usize) {
        let hd = cfg.head_dim;
        for (r, row) in x.chunks_exact_mut(heads * hd).enumerate() {
            let cos = &self.cos[r * self.half..(r + 1) * self.half];
            let sin = &self.sin[r * self.half..(r + 1) * self.half];
            for head in row.chunks_exact_mut(hd) {
                for i in 0..self.half {
                    let (a, b) = match cfg.rope_style {
                        RopeStyle::Interleaved => (2 * i, 2 * i + 1),
                        RopeStyle::Half => (i, i + self.half),
                    };
                    let (x0, x1) = (head[a], head[b]);
                    // ggml's C code, contracted to FMA by GCC.
                    head[a] = x0.mul_add(cos[i], -(x1 * sin[i]));
                    head[b] = x0.mul_add(sin[i], x1 * cos[i]);
                }
            }
        }
    }
}

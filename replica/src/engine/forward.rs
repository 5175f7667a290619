//! The Llama forward pass over a ragged batch, on the CPU.
//!
//! All new tokens of all items are stacked into one `T x dim` activation matrix so every
//! weight row is read once per step; attention then runs per (token, head) against the
//! paged KV pool, causally within each sequence.

use super::config::{ModelConfig, RopeStyle};
use super::kernels::{axpy, dot_f32};
use super::kv::{KvPool, PageId};
use super::weights::ModelWeights;
use super::StepItem;
use rayon::prelude::*;

/// Where one stacked row comes from.
#[derive(Clone, Copy)]
struct Row<'a> {
    pos: usize,
    pages: &'a [PageId],
}

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
        lw.wq.matmul(&a.h, t, &mut a.q);
        lw.wk.matmul(&a.h, t, &mut a.k);
        lw.wv.matmul(&a.h, t, &mut a.v);
        rope.apply(cfg, &mut a.q, cfg.n_heads);
        rope.apply(cfg, &mut a.k, cfg.n_kv_heads);
        for (i, r) in rows.iter().enumerate() {
            let (k, v) = (&a.k[i * kvd..(i + 1) * kvd], &a.v[i * kvd..(i + 1) * kvd]);
            kv.write(r.pages, l, r.pos, k, v);
        }
        attention(cfg, kv, l, &rows, &a.q, &mut a.att);
        lw.wo.matmul(&a.att, t, &mut a.o);
        add_into(&mut a.x, &a.o);
        rmsnorm_rows(&a.x, &lw.ffn_norm, cfg.rms_eps, &mut a.h);
        lw.w_gate.matmul(&a.h, t, &mut a.gate);
        lw.w_up.matmul(&a.h, t, &mut a.up);
        a.gate
            .par_chunks_mut(4096)
            .zip(a.up.par_chunks(4096))
            .for_each(|(g, u)| {
                for (gi, ui) in g.iter_mut().zip(u) {
                    *gi = *gi / (1.0 + (-*gi).exp()) * ui;
                }
            });
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

/// `out[r] = x[r] / rms(x[r]) * weight` for each row.
pub(crate) fn rmsnorm_rows(x: &[f32], weight: &[f32], eps: f32, out: &mut [f32]) {
    let d = weight.len();
    for (xr, or) in x.chunks_exact(d).zip(out.chunks_exact_mut(d)) {
        let ss: f64 = xr.iter().map(|&v| (v as f64) * (v as f64)).sum();
        let scale = (1.0 / (ss / d as f64 + eps as f64).sqrt()) as f32;
        for ((o, &v), &g) in or.iter_mut().zip(xr).zip(weight) {
            *o = v * scale * g;
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
    fn new(cfg: &ModelConfig, rows: &[Row<'_>]) -> Self {
        let half = cfg.head_dim / 2;
        let inv: Vec<f64> = (0..half)
            .map(|i| (cfg.rope_theta as f64).powf(-2.0 * i as f64 / cfg.head_dim as f64))
            .collect();
        let mut cos = Vec::with_capacity(rows.len() * half);
        let mut sin = Vec::with_capacity(rows.len() * half);
        for r in rows {
            let p = r.pos as f64 * cfg.rope_freq_scale as f64;
            for f in &inv {
                let (s, c) = (p * f).sin_cos();
                cos.push(c as f32);
                sin.push(s as f32);
            }
        }
        Self { half, cos, sin }
    }

    /// Rotates every head of every row of `x` (`rows x heads*head_dim`).
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
                    head[a] = x0 * cos[i] - x1 * sin[i];
                    head[b] = x0 * sin[i] + x1 * cos[i];
                }
            }
        }
    }
}

/// Causal grouped-query attention of every (row, head) over the pages of its sequence.
fn attention(
    cfg: &ModelConfig,
    kv: &KvPool,
    layer: usize,
    rows: &[Row<'_>],
    q: &[f32],
    out: &mut [f32],
) {
    let hd = cfg.head_dim;
    let group = cfg.n_heads / cfg.n_kv_heads;
    let kvd = cfg.kv_dim();
    let bs = kv.layout().block_size.get();
    let scale = 1.0 / (hd as f32).sqrt();
    out.par_chunks_mut(hd).enumerate().for_each(|(idx, o)| {
        let (r, h) = (idx / cfg.n_heads, idx % cfg.n_heads);
        let row = rows[r];
        let qh = &q[idx * hd..(idx + 1) * hd];
        let koff = (h / group) * hd;
        let n = row.pos + 1;
        let mut scores = Vec::with_capacity(n);
        for (pi, &page) in row.pages.iter().enumerate().take(n.div_ceil(bs)) {
            let len = (n - pi * bs).min(bs);
            let keys = kv.page_rows(page, layer, 0, len);
            for key in keys.chunks_exact(kvd) {
                scores.push(dot_f32(qh, &key[koff..koff + hd]) * scale);
            }
        }
        let max = scores.iter().copied().fold(f32::NEG_INFINITY, f32::max);
        let mut sum = 0.0f32;
        for s in scores.iter_mut() {
            *s = (*s - max).exp();
            sum += *s;
        }
        o.fill(0.0);
        let inv = 1.0 / sum;
        let mut j = 0;
        for (pi, &page) in row.pages.iter().enumerate().take(n.div_ceil(bs)) {
            let len = (n - pi * bs).min(bs);
            let vals = kv.page_rows(page, layer, 1, len);
            for val in vals.chunks_exact(kvd) {
                axpy(scores[j] * inv, &val[koff..koff + hd], o);
                j += 1;
            }
        }
    });
}

//! Causal grouped-query attention over the paged KV pool, rounded the way llama.cpp's CPU
//! backend rounds it (f16 K/V cache, f16 query, f16 probabilities, 16-lane sums).
//!
//! SmolLM2 amplifies tiny differences (a flipped activation rounding changes logits by
//! percents), so matching llama.cpp within 2e-2 needs the same roundings, not just the
//! same maths: products of f16 values are exact in f32, and every sum below follows the
//! lane order of ggml's AVX-512 kernels: `tinyBLAS<16>` dot products when a sequence brings
//! several tokens (prompt processing), `ggml_vec_dot_f16` (4 x 16 accumulators) for a single
//! decode token, `_mm512_reduce_add_ps`, and `ggml_vec_soft_max_f32`.
//!
//! This file walks the (row, head) pairs and does the softmax; the loops over K and V rows
//! are in `kernels::attn` (AVX-512 versions there give the same bits).

use super::config::ModelConfig;
use super::kernels::attn::{pv_slots, qk_scores, HeadRows, LANES, STEP};
use super::kernels::{exp_sub, reduce16, with_simd};
use super::kv::{KvPool, PageId};
use half::f16;
use rayon::prelude::*;

/// Rounds `x` to the nearest f16 value, ties to even (kept as f32): the same result as a
/// round trip through `half::f16` (or F16C), without the conversions.
#[inline(always)]
pub(crate) fn round_f16(x: f32) -> f32 {
    /// Smallest normal f16, 2^-14.
    const MIN_NORMAL: f32 = 6.103_515_6e-5;
    /// Values from here on round to infinity.
    const OVERFLOW: f32 = 65_520.0;
    let a = x.abs();
    if a < MIN_NORMAL {
        // f16 subnormals are multiples of 2^-24; the scaling is exact.
        return (x * 16_777_216.0).round_ties_even() * (1.0 / 16_777_216.0);
    }
    if a.is_nan() {
        return x;
    }
    if a >= OVERFLOW {
        return f32::INFINITY.copysign(x);
    }
    // Keep 10 of the 23 mantissa bits, rounding to nearest even.
    let b = x.to_bits();
    let lsb = (b >> 13) & 1;
    f32::from_bits((b + 0x0fff + lsb) & !0x1fff)
}

/// Where one stacked row of a step comes from.
#[derive(Clone, Copy)]
pub(crate) struct Row<'a> {
    /// Absolute position of the row's token.
    pub(crate) pos: usize,
    /// Block table of the row's sequence.
    pub(crate) pages: &'a [PageId],
    /// The row's sequence brings a single token this step (decode).
    pub(crate) single: bool,
}

/// `out[d] = fold(acc[.., d])` for every column `d` of `acc` (`slots x hd`, slot-major) at
/// once: the same additions as [`fold`] column by column, in an order that vectorises
/// over `d`. Overwrites `acc`.
#[inline(always)]
fn fold_columns(acc: &mut [f32], hd: usize, single: bool, out: &mut [f32]) {
    let lanes = LANES * hd;
    let (a0, rest) = acc.split_at_mut(lanes);
    if single {
        // Slots l, l + 16, l + 32, l + 48 -> lane l: (x0 + x2) + (x1 + x3).
        let (a1, rest) = rest.split_at(lanes);
        let (a2, a3) = rest.split_at(lanes);
        for (((x0, x1), x2), x3) in a0.iter_mut().zip(a1).zip(a2).zip(&a3[..lanes]) {
            *x0 = (*x0 + *x2) + (*x1 + *x3);
        }
    }
    // `reduce16` on every column: lanes i + 8 onto i, then i + 4 onto i, then the last 4.
    let (t8, hi) = a0.split_at_mut(8 * hd);
    for (x, y) in t8.iter_mut().zip(hi.iter()) {
        *x += *y;
    }
    let (t4, hi) = t8.split_at_mut(4 * hd);
    for (x, y) in t4.iter_mut().zip(hi.iter()) {
        *x += *y;
    }
    let (e0, e1) = t4.split_at(2 * hd);
    for (d, o) in out.iter_mut().enumerate() {
        *o = (e0[d] + e1[d]) + (e0[hd + d] + e1[hd + d]);
    }
}

/// Attention of every (row, head) against the pages of its sequence; writes `out`
/// (`rows x n_heads*head_dim`). K/V in `kv` are f16.
pub(crate) fn attention(
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
    out.par_chunks_mut(hd)
        .enumerate()
        .for_each_init(Scratch::default, |sc, (idx, o)| {
            // Compiled for AVX2 when available (same results: no FMA contraction).
            with_simd(
                #[inline(always)]
                || {
                    let (r, h) = (idx / cfg.n_heads, idx % cfg.n_heads);
                    let row = rows[r];
                    let Scratch { qh, p, acc, kp, vp } = sc;
                    qh.clear();
                    qh.extend(q[idx * hd..(idx + 1) * hd].iter().map(|&v| round_f16(v)));
                    let n = row.pos + 1;
                    let n_pages = n.div_ceil(bs);
                    for (kind, dst) in [(0, &mut *kp), (1, &mut *vp)] {
                        dst.clear();
                        dst.extend(
                            row.pages[..n_pages].iter().enumerate().map(|(pi, &pg)| {
                                kv.page_rows(pg, layer, kind, (n - pi * bs).min(bs))
                            }),
                        );
                    }
                    let head = |pages| HeadRows {
                        pages,
                        block_size: bs,
                        kv_dim: kvd,
                        off: (h / group) * hd,
                        head_dim: hd,
                        n,
                    };
                    p.clear();
                    p.resize(n.next_multiple_of(LANES), 0.0);
                    qk_scores(qh, &head(kp), row.single, scale, p);
                    softmax_f16(p, n);
                    // out[d] = sum_s p[s] * v[s][d]: slot s % 16 (tinyBLAS) or s % 64
                    // (vec_dot_f16), accumulated in position order (llama.cpp pads
                    // positions to a multiple of 256, which adds zeros).
                    let slots = if row.single { STEP } else { LANES };
                    acc.resize(slots * hd, 0.0);
                    pv_slots(p, &head(vp), slots, acc);
                    // Columns folded together (vectorised over d), same sums as `fold`.
                    fold_columns(acc, hd, row.single, o);
                },
            )
        });
}
/// Softmax of the first `n` scores of `p` (the rest are masked), rounded as llama.cpp's
/// CPU path rounds it: ggml's `expf`, 16-lane sums added in f64, then f16 probabilities.
#[inline(always)]
fn softmax_f16(p: &mut [f32], n: usize) {
    let max = p[..n].iter().copied().fold(f32::NEG_INFINITY, f32::max);
    // Masked positions contribute exp(-inf) = 0 to their lane group.
    p[n..].fill(f32::NEG_INFINITY);
    exp_sub(p, max);
    let mut sum = 0.0f64;
    for g in p.chunks_exact(LANES) {
        let mut e = [0.0f32; LANES];
        e.copy_from_slice(g);
        sum += reduce16(&e) as f64;
    }
    let inv = (1.0 / sum) as f32;
    for v in p.iter_mut() {
        *v = round_f16(*v * inv);
    }
}

/// Per-worker buffers reused across (row, head) pairs.
#[derive(Default)]
struct Scratch<'a> {
    qh: Vec<f32>,
    p: Vec<f32>,
    acc: Vec<f32>,
    /// The sequence's K and V rows of this layer, page by page.
    kp: Vec<&'a [f16]>,
    vp: Vec<&'a [f16]>,
}

#[cfg(test)]
mod tests {
    use super::{fold_columns, round_f16, LANES, STEP};
    use crate::kernels::attn::fold;
    use half::f16;

    #[test]
    fn column_folds_have_the_per_column_bits() {
        let hd = 64;
        for (single, slots) in [(true, STEP), (false, LANES)] {
            let acc: Vec<f32> = (0..slots * hd)
                .map(|i| ((i * 7919 % 1013) as f32 - 506.0) * 1.37e-3 * (1.0 + (i % 7) as f32))
                .collect();
            let want: Vec<f32> = (0..hd)
                .map(|d| {
                    let col: Vec<f32> = (0..slots).map(|l| acc[l * hd + d]).collect();
                    fold(&col, single)
                })
                .collect();
            let mut got = vec![0.0; hd];
            fold_columns(&mut acc.clone(), hd, single, &mut got);
            let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
            assert_eq!(bits(&got), bits(&want), "single={single}");
        }
    }

    #[test]
    fn round_f16_equals_half_crate() {
        let mut x = 1.0e-9f32;
        while x < 1.0e6 {
            for v in [x, -x, x * 1.000_123, x * 0.999_71] {
                let want = f16::from_f32(v).to_f32();
                assert_eq!(round_f16(v).to_bits(), want.to_bits(), "{v}");
            }
            x *= 1.013;
        }
        for v in [
            0.0f32,
            -0.0,
            65_504.0,
            65_519.0,
            65_520.0,
            1e9,
            f32::INFINITY,
        ] {
            assert_eq!(round_f16(v), f16::from_f32(v).to_f32(), "{v}");
        }
        // Ties round to even.
        let tie = 1.0 + 2.0f32.powi(-11);
        assert_eq!(round_f16(tie), 1.0);
        assert_eq!(
            round_f16(1.0 + 3.0 * 2.0f32.powi(-11)),
            1.0 + 2.0f32.powi(-9)
        );
    }
}

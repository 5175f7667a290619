//! Causal grouped-query attention over the paged KV pool, rounded the way llama.cpp's CPU
//! backend rounds it (f16 K/V cache, f16 query, f16 probabilities, 16-lane sums).
//!
//! SmolLM2 amplifies tiny differences (a flipped activation rounding changes logits by
//! percents), so matching llama.cpp within 2e-2 needs the same roundings, not just the
//! same maths: products of f16 values are exact in f32, and every sum below follows the
//! lane order of ggml's AVX-512 kernels: `tinyBLAS<16>` dot products when a sequence brings
//! several tokens (prompt processing), `ggml_vec_dot_f16` (4 x 16 accumulators) for a single
//! decode token, `_mm512_reduce_add_ps`, and `ggml_vec_soft_max_f32`.

use super::config::ModelConfig;
use super::kernels::{exp_sub, reduce16, with_simd};
use super::kv::{KvPool, PageId};
use rayon::prelude::*;

/// SIMD width whose summation order is reproduced.
const LANES: usize = 16;

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

/// Accumulator slots of ggml's `vec_dot_f16` (`GGML_F16_STEP` = 4 vectors of 16).
const STEP: usize = 64;

/// Folds per-slot sums the way each kernel does: `tinyBLAS` has one 16-lane chain;
/// `vec_dot_f16` has four (`(x0 + x2) + (x1 + x3)`), then both reduce 16 lanes.
#[inline(always)]
fn fold(acc: &[f32], single: bool) -> f32 {
    let mut lanes = [0.0f32; LANES];
    if single {
        for (l, v) in lanes.iter_mut().enumerate() {
            *v = (acc[l] + acc[l + 2 * LANES]) + (acc[l + LANES] + acc[l + 3 * LANES]);
        }
    } else {
        lanes.copy_from_slice(&acc[..LANES]);
    }
    reduce16(&lanes)
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

/// `q . k` in the order of the kernel `single` selects (f16-valued inputs; products exact).
#[inline(always)]
fn qk_dot(q: &[f32], k: &[f32], single: bool) -> f32 {
    if !single {
        return dot16(q, k);
    }
    let main = q.len() / STEP * STEP;
    let mut acc = [0.0f32; STEP];
    for (cq, ck) in q[..main]
        .chunks_exact(STEP)
        .zip(k[..main].chunks_exact(STEP))
    {
        for ((s, x), y) in acc.iter_mut().zip(cq).zip(ck) {
            *s += x * y;
        }
    }
    let mut sum = fold(&acc, true) as f64;
    for (x, y) in q[main..].iter().zip(&k[main..]) {
        sum += (x * y) as f64;
    }
    sum as f32
}

/// `sum(a[i] * b[i])` with one accumulator per lane `i % 16`, then the AVX-512 reduction.
#[inline(always)]
fn dot16(a: &[f32], b: &[f32]) -> f32 {
    let mut acc = [0.0f32; LANES];
    for (ca, cb) in a.chunks(LANES).zip(b.chunks(LANES)) {
        for ((s, x), y) in acc.iter_mut().zip(ca).zip(cb) {
            *s += x * y;
        }
    }
    reduce16(&acc)
}

/// Attention of every (row, head) against the pages of its sequence; writes `out`
/// (`rows x n_heads*head_dim`). K/V in `kv` must already be f16-rounded.
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
                    let Scratch { qh, p, acc } = sc;
                    qh.clear();
                    qh.extend(q[idx * hd..(idx + 1) * hd].iter().map(|&v| round_f16(v)));
                    let koff = (h / group) * hd;
                    let n = row.pos + 1;
                    let n_pages = n.div_ceil(bs);
                    p.clear();
                    for (pi, &page) in row.pages.iter().enumerate().take(n_pages) {
                        let len = (n - pi * bs).min(bs);
                        for key in kv.page_rows(page, layer, 0, len).chunks_exact(kvd) {
                            p.push(qk_dot(qh, &key[koff..koff + hd], row.single) * scale);
                        }
                    }
                    let max = p.iter().copied().fold(f32::NEG_INFINITY, f32::max);
                    // Masked positions (beyond `pos`) contribute exp(-inf) = 0 to their lane group.
                    p.resize(n.next_multiple_of(LANES), f32::NEG_INFINITY);
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
                    // out[d] = sum_s p[s] * v[s][d]: slot s % 16 (tinyBLAS) or s % 64 (vec_dot_f16),
                    // accumulated in position order (llama.cpp pads positions to a multiple of 256).
                    let slots = if row.single { STEP } else { LANES };
                    acc.clear();
                    acc.resize(slots * hd, 0.0);
                    let mut s = 0;
                    for (pi, &page) in row.pages.iter().enumerate().take(n_pages) {
                        let len = (n - pi * bs).min(bs);
                        for val in kv.page_rows(page, layer, 1, len).chunks_exact(kvd) {
                            let slot = s % slots;
                            let lane = &mut acc[slot * hd..(slot + 1) * hd];
                            let w = p[s];
                            for (a, &x) in lane.iter_mut().zip(&val[koff..koff + hd]) {
                                *a += w * x;
                            }
                            s += 1;
                        }
                    }
                    // Columns folded together (vectorised over d), same sums as `fold`.
                    fold_columns(acc, hd, row.single, o);
                },
            )
        });
}

/// Per-worker buffers reused across (row, head) pairs.
#[derive(Default)]
struct Scratch {
    qh: Vec<f32>,
    p: Vec<f32>,
    acc: Vec<f32>,
}

#[cfg(test)]
mod tests {
    use super::{fold, fold_columns, round_f16, LANES, STEP};
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

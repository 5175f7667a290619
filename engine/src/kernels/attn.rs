//! The two inner loops of attention over the f16 KV pool: one head's query against every
//! K row of its sequence, and the probability-weighted sum of the V rows into per-slot
//! accumulators. AVX-512 versions when the CPU has them (`WARMPATH_NO_AVX512=1` keeps the
//! portable ones); both give the same bits, because every product of two f16 values is
//! exact in f32 and both add in the order documented on each function.

pub(crate) use super::rows::{HeadRows, LANES};
use super::{reduce16, widen_f16};

/// Accumulator slots of ggml's `vec_dot_f16` (`GGML_F16_STEP` = 4 vectors of 16).
pub(crate) const STEP: usize = 64;

/// `out[s] = (q . k[s]) * scale` for every position `s < rows.n`; `out` holds at least
/// `rows.n` rounded up to 16 (the rest is scratch). `q` is f16-valued.
///
/// Summation order, that of the kernel llama.cpp picks: with `single` (one decode token),
/// `ggml_vec_dot_f16`: four 16-lane accumulators over each 64 columns, then
/// `(x0 + x2) + (x1 + x3)`; otherwise `tinyBLAS`'s one 16-lane chain; then both reduce
/// the 16 lanes as `_mm512_reduce_add_ps` does. A `single` head width that is not a
/// multiple of 64 adds its tail in f64, as `ggml_vec_dot_f16` does.
#[inline(always)]
pub(crate) fn qk_scores(q: &[f32], rows: &HeadRows<'_>, single: bool, scale: f32, out: &mut [f32]) {
    assert!(q.len() == rows.head_dim && out.len() >= rows.n.next_multiple_of(LANES));
    #[cfg(target_arch = "x86_64")]
    if super::attn_avx512::qk_scores(q, rows, single, scale, out) {
        return;
    }
    qk_scores_portable(q, rows, single, scale, out);
}

/// [`qk_scores`] in plain Rust.
#[inline(always)]
fn qk_scores_portable(q: &[f32], rows: &HeadRows<'_>, single: bool, scale: f32, out: &mut [f32]) {
    let mut k = vec![0.0f32; rows.head_dim];
    rows.each(|s, row| {
        widen_f16(row, &mut k);
        out[s] = dot(q, &k, single) * scale;
    });
}

/// `acc[j][d] = sum p[s] * v[s][d]` over the positions `s = j, j + slots, j + 2 slots, ...`
/// below `rows.n`, added in position order (`acc` is `slots x head_dim`, slot-major; all
/// of it is written). This is the lane assignment of `ggml_vec_dot_f16` (`slots` = 64)
/// or `tinyBLAS` (16) over llama.cpp's transposed V cache. `p` is f16-valued.
#[inline(always)]
pub(crate) fn pv_slots(p: &[f32], rows: &HeadRows<'_>, slots: usize, acc: &mut [f32]) {
    let hd = rows.head_dim;
    assert!(p.len() >= rows.n && acc.len() == slots * hd && slots > 0);
    #[cfg(target_arch = "x86_64")]
    if super::attn_avx512::pv_slots(p, rows, slots, acc) {
        return;
    }
    pv_slots_portable(p, rows, slots, acc);
}

/// [`pv_slots`] in plain Rust.
#[inline(always)]
fn pv_slots_portable(p: &[f32], rows: &HeadRows<'_>, slots: usize, acc: &mut [f32]) {
    let hd = rows.head_dim;
    acc.fill(0.0);
    let mut v = vec![0.0f32; hd];
    rows.each(|s, row| {
        widen_f16(row, &mut v);
        let slot = s % slots;
        let w = p[s];
        for (a, &x) in acc[slot * hd..(slot + 1) * hd].iter_mut().zip(&v) {
            *a += w * x;
        }
    });
}

/// Folds per-slot sums the way each kernel does: `tinyBLAS` has one 16-lane chain;
/// `vec_dot_f16` has four (`(x0 + x2) + (x1 + x3)`), then both reduce 16 lanes.
#[inline(always)]
pub(crate) fn fold(acc: &[f32], single: bool) -> f32 {
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

/// `q . k` in the order of the kernel `single` selects (see [`qk_scores`]).
#[inline(always)]
fn dot(q: &[f32], k: &[f32], single: bool) -> f32 {
    if !single {
        let mut acc = [0.0f32; LANES];
        for (cq, ck) in q.chunks(LANES).zip(k.chunks(LANES)) {
            for ((s, x), y) in acc.iter_mut().zip(cq).zip(ck) {
                *s += x * y;
            }
        }
        return reduce16(&acc);
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

#[cfg(test)]
mod tests {
    use super::*;
    use half::f16;

    /// Deterministic f16 values of mixed sign and magnitude.
    fn halves(n: usize, seed: u64) -> Vec<f16> {
        let mut x = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
        (0..n)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                let u = (x >> 40) as f32 / (1u64 << 24) as f32;
                f16::from_f32((u - 0.5) * 8.0 * (1.0 + (x & 7) as f32))
            })
            .collect()
    }

    /// The AVX-512 loops give the portable loops' bits for every shape they take: head
    /// widths 64 and 128, both kernels' orders, page sizes that do and do not divide 16,
    /// and position counts on and off the group of 16.
    #[test]
    #[cfg(target_arch = "x86_64")]
    fn simd_loops_have_the_portable_bits() {
        if !super::super::attn_avx512::available() {
            eprintln!("no AVX-512F (or WARMPATH_NO_AVX512 is set): only the portable loops run");
            return;
        }
        let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
        for (hd, kv_heads) in [(64, 3), (128, 2)] {
            let kv_dim = hd * kv_heads;
            for block_size in [16, 5, 32] {
                for n in [1usize, 7, 16, 17, 63, 64, 65, 200] {
                    let n_pages = n.div_ceil(block_size);
                    let store: Vec<Vec<f16>> = (0..n_pages)
                        .map(|pi| halves(block_size * kv_dim, (pi * 131 + n) as u64))
                        .collect();
                    let pages: Vec<&[f16]> = store.iter().map(|v| &v[..]).collect();
                    let rows = HeadRows {
                        pages: &pages,
                        block_size,
                        kv_dim,
                        off: hd * (kv_heads - 1),
                        head_dim: hd,
                        n,
                    };
                    let q: Vec<f32> = halves(hd, n as u64 + 7)
                        .iter()
                        .map(|h| h.to_f32())
                        .collect();
                    let p: Vec<f32> = halves(n, 99)
                        .iter()
                        .map(|h| h.to_f32().abs() / 64.0)
                        .collect();
                    for single in [true, false] {
                        let what = format!("hd {hd} bs {block_size} n {n} single {single}");
                        let pad = n.next_multiple_of(LANES);
                        let (mut want, mut got) = (vec![0.0; pad], vec![0.0; pad]);
                        qk_scores_portable(&q, &rows, single, 0.125, &mut want);
                        assert!(super::super::attn_avx512::qk_scores(
                            &q, &rows, single, 0.125, &mut got
                        ));
                        assert_eq!(bits(&got[..n]), bits(&want[..n]), "scores, {what}");
                        let slots = if single { STEP } else { LANES };
                        let (mut want, mut got) = (vec![1.0; slots * hd], vec![2.0; slots * hd]);
                        pv_slots_portable(&p, &rows, slots, &mut want);
                        assert!(super::super::attn_avx512::pv_slots(
                            &p, &rows, slots, &mut got
                        ));
                        assert_eq!(bits(&got), bits(&want), "weighted sums, {what}");
                    }
                }
            }
        }
    }

    /// The portable score of one position is the plain dot product up to rounding, and
    /// the weighted sums land in slot `s % slots`.
    #[test]
    fn portable_loops_compute_attention_sums() {
        let (hd, kv_dim, block_size) = (64, 64, 4);
        let store: Vec<Vec<f16>> = (0..3).map(|pi| halves(block_size * kv_dim, pi)).collect();
        let pages: Vec<&[f16]> = store.iter().map(|v| &v[..]).collect();
        let rows = HeadRows {
            pages: &pages,
            block_size,
            kv_dim,
            off: 0,
            head_dim: hd,
            n: 10,
        };
        let q: Vec<f32> = halves(hd, 5).iter().map(|h| h.to_f32()).collect();
        let mut out = vec![0.0; 16];
        qk_scores_portable(&q, &rows, true, 1.0, &mut out);
        for (s, &got) in out[..10].iter().enumerate() {
            let k = rows.row(s / block_size, s % block_size);
            let exact: f64 = q
                .iter()
                .zip(k)
                .map(|(a, b)| *a as f64 * b.to_f32() as f64)
                .sum();
            assert!(
                (got as f64 - exact).abs() <= 1e-4 * exact.abs().max(1.0),
                "{s}"
            );
        }
        let p = vec![1.0; 10];
        let mut acc = vec![0.0; LANES * hd];
        pv_slots_portable(&p, &rows, LANES, &mut acc);
        assert_eq!(acc[3 * hd], rows.row(0, 3)[0].to_f32());
        assert!(
            acc[12 * hd..].iter().all(|&x| x == 0.0),
            "slots past n stay zero"
        );
    }
}

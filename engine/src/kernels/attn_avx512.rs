//! AVX-512 versions of the attention loops in [`super::attn`], with the same bits.
//!
//! Scores: each K row's products (f16 converted by `vcvtph2ps`, exact in f32) are summed
//! into one 16-lane vector per position in the kernel's order; sixteen positions' vectors
//! are then reduced together by a butterfly of shuffles whose additions pair the lanes
//! exactly as `_mm512_reduce_add_ps` does (`i + 8`, then `i + 4`, then `(0 + 2) + (1 + 3)`),
//! so one vector holds sixteen scores. Weighted V sums: one slot at a time, its positions
//! in order, the accumulators kept in registers.
#![allow(unsafe_code)]

use super::rows::{HeadRows, LANES};
use std::arch::x86_64::*;

/// The CPU has AVX-512F (with F16C and FMA) and `WARMPATH_NO_AVX512` is unset.
pub(super) fn available() -> bool {
    static ON: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *ON.get_or_init(|| {
        is_x86_feature_detected!("avx512f")
            && is_x86_feature_detected!("avx2")
            && is_x86_feature_detected!("fma")
            && is_x86_feature_detected!("f16c")
            && std::env::var_os("WARMPATH_NO_AVX512").is_none()
    })
}

/// Every page row the loops read lies inside its page: positions `0..rows.n`, columns
/// `off..off + head_dim` of each row.
fn in_bounds(rows: &HeadRows<'_>) -> bool {
    if rows.off + rows.head_dim > rows.kv_dim || rows.block_size == 0 {
        return false;
    }
    let mut left = rows.n;
    for page in rows.pages {
        if left == 0 {
            return true;
        }
        let len = left.min(rows.block_size);
        if page.len() < len * rows.kv_dim {
            return false;
        }
        left -= len;
    }
    left == 0
}

/// [`super::attn::qk_scores`] when this CPU and head width allow; `false` otherwise.
pub(super) fn qk_scores(
    q: &[f32],
    rows: &HeadRows<'_>,
    single: bool,
    scale: f32,
    out: &mut [f32],
) -> bool {
    if !available() || !in_bounds(rows) || out.len() < rows.n.next_multiple_of(LANES) {
        return false;
    }
    // SAFETY: `available()` checked the CPU features; `in_bounds` checked every row the
    // kernel reads, and `out` holds `n` rounded up to 16 values.
    unsafe {
        match (rows.head_dim, single) {
            (64, true) => qk_impl::<4, true>(q, rows, scale, out),
            (128, true) => qk_impl::<8, true>(q, rows, scale, out),
            (64, false) => qk_impl::<4, false>(q, rows, scale, out),
            (128, false) => qk_impl::<8, false>(q, rows, scale, out),
            _ => return false,
        }
    }
    true
}

/// [`super::attn::pv_slots`] when this CPU and head width allow; `false` otherwise.
pub(super) fn pv_slots(p: &[f32], rows: &HeadRows<'_>, slots: usize, acc: &mut [f32]) -> bool {
    if !available() || !in_bounds(rows) || p.len() < rows.n {
        return false;
    }
    // SAFETY: as in `qk_scores`; `acc` holds `slots * head_dim` values (checked by the
    // caller) and `p` at least `n`.
    unsafe {
        match (
            rows.head_dim,
            rows.block_size.is_multiple_of(4) && slots.is_multiple_of(4),
        ) {
            (64, true) => pv_impl::<4, 4>(p, rows, slots, acc),
            (64, false) => pv_impl::<4, 1>(p, rows, slots, acc),
            (128, true) => pv_impl::<8, 2>(p, rows, slots, acc),
            (128, false) => pv_impl::<8, 1>(p, rows, slots, acc),
            _ => return false,
        }
    }
    true
}

/// Where position `g` of a group of 16 goes in the butterfly's input so that its score
/// comes out in lane `g` (the butterfly leaves lane `4k + j` holding input `4j + k`).
const PERM: [usize; LANES] = [0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15];

/// Sixteen 16-lane vectors to their sixteen horizontal sums, each in the order of
/// `_mm512_reduce_add_ps` (lane `4k + j` holds the sum of input `4j + k`).
#[inline]
#[target_feature(enable = "avx512f,avx2,fma,f16c")]
fn butterfly(z: &[__m512; LANES]) -> __m512 {
    // Lanes i and i + 8 of two inputs: [a.lo8 + a.hi8 | b.lo8 + b.hi8].
    let l1 = |a: __m512, b: __m512| {
        _mm512_add_ps(
            _mm512_shuffle_f32x4::<0x44>(a, b),
            _mm512_shuffle_f32x4::<0xEE>(a, b),
        )
    };
    // Within each half, lanes i and i + 4: one 128-bit lane per input position.
    let l2 = |a: __m512, b: __m512| {
        _mm512_add_ps(
            _mm512_shuffle_f32x4::<0x88>(a, b),
            _mm512_shuffle_f32x4::<0xDD>(a, b),
        )
    };
    // Within each 128-bit lane, elements 0 + 2 and 1 + 3.
    let l3 = |a: __m512, b: __m512| {
        _mm512_add_ps(
            _mm512_shuffle_ps::<0x44>(a, b),
            _mm512_shuffle_ps::<0xEE>(a, b),
        )
    };
    // The last pair.
    let l4 = |a: __m512, b: __m512| {
        _mm512_add_ps(
            _mm512_shuffle_ps::<0x88>(a, b),
            _mm512_shuffle_ps::<0xDD>(a, b),
        )
    };
    let r: [__m512; 8] = std::array::from_fn(|k| l1(z[2 * k], z[2 * k + 1]));
    let s: [__m512; 4] = std::array::from_fn(|m| l2(r[2 * m], r[2 * m + 1]));
    l4(l3(s[0], s[1]), l3(s[2], s[3]))
}

/// 16 f16 values at `p`, widened.
#[inline(always)]
unsafe fn load16(p: *const half::f16) -> __m512 {
    // SAFETY: the caller guarantees 16 readable values at `p`.
    unsafe { _mm512_cvtph_ps(_mm256_loadu_si256(p.cast())) }
}

/// `NQ` = head width / 16; `SINGLE` picks `ggml_vec_dot_f16`'s order over `tinyBLAS`'s.
#[target_feature(enable = "avx512f,avx2,fma,f16c")]
unsafe fn qk_impl<const NQ: usize, const SINGLE: bool>(
    q: &[f32],
    rows: &HeadRows<'_>,
    scale: f32,
    out: &mut [f32],
) {
    // SAFETY (whole function): `q` holds NQ * 16 values; every row read lies in its page
    // and every store in `out` (see `qk_scores`).
    let qv: [__m512; NQ] =
        std::array::from_fn(|c| unsafe { _mm512_loadu_ps(q.as_ptr().add(c * LANES)) });
    let scale = _mm512_set1_ps(scale);
    let mut z = [_mm512_setzero_ps(); LANES];
    let (mut g, mut s0, mut left) = (0, 0, rows.n);
    for page in rows.pages {
        if left == 0 {
            break;
        }
        let len = left.min(rows.block_size);
        left -= len;
        let base = page.as_ptr();
        for si in 0..len {
            let k = unsafe { base.add(si * rows.kv_dim + rows.off) };
            let y = if SINGLE {
                // Accumulator j takes columns 64 i + 16 j + lane, i = 0, 1, ...
                let mut a = [_mm512_setzero_ps(); 4];
                for c in 0..NQ {
                    let kc = unsafe { load16(k.add(c * LANES)) };
                    a[c % 4] = _mm512_fmadd_ps(qv[c], kc, a[c % 4]);
                }
                _mm512_add_ps(_mm512_add_ps(a[0], a[2]), _mm512_add_ps(a[1], a[3]))
            } else {
                let mut a = _mm512_setzero_ps();
                for (c, &qc) in qv.iter().enumerate() {
                    a = _mm512_fmadd_ps(qc, unsafe { load16(k.add(c * LANES)) }, a);
                }
                a
            };
            z[PERM[g]] = y;
            g += 1;
            if g == LANES {
                let v = _mm512_mul_ps(butterfly(&z), scale);
                unsafe { _mm512_storeu_ps(out.as_mut_ptr().add(s0), v) };
                s0 += LANES;
                g = 0;
            }
        }
    }
    if g > 0 {
        for &i in &PERM[g..] {
            z[i] = _mm512_setzero_ps();
        }
        let v = _mm512_mul_ps(butterfly(&z), scale);
        unsafe { _mm512_storeu_ps(out.as_mut_ptr().add(s0), v) };
    }
}

/// `NV` = head width / 16; `U` slots at a time (`U` must divide 16, the block size and
/// `slots`): their positions at each step are `U` neighbouring rows of one page, and the
/// `U * NV` independent accumulators hide the FMA latency one slot's chain would expose.
#[target_feature(enable = "avx512f,avx2,fma,f16c")]
unsafe fn pv_impl<const NV: usize, const U: usize>(
    p: &[f32],
    rows: &HeadRows<'_>,
    slots: usize,
    acc: &mut [f32],
) {
    let (bs, hd, kvd, n) = (rows.block_size, rows.head_dim, rows.kv_dim, rows.n);
    let (step_pages, step_slots) = (slots / bs, slots % bs);
    // Adds p[s] * v[s] to `a` for the position in page `pi`, slot `si`.
    let add = |a: &mut [__m512; NV], pi: usize, si: usize, w: f32| {
        // SAFETY: callers pass positions below n, which lie in page pi at slot si
        // (checked by `in_bounds`), and the head's NV * 16 columns lie in the row.
        let v = unsafe {
            rows.pages
                .get_unchecked(pi)
                .as_ptr()
                .add(si * kvd + rows.off)
        };
        let w = _mm512_set1_ps(w);
        for (c, ac) in a.iter_mut().enumerate() {
            *ac = _mm512_fmadd_ps(w, unsafe { load16(v.add(c * LANES)) }, *ac);
        }
    };
    for j in (0..slots).step_by(U) {
        let mut a = [[_mm512_setzero_ps(); NV]; U];
        let (mut pi, mut si, mut s) = (j / bs, j % bs, j);
        // Steps where all U positions exist.
        while s + U <= n {
            for (u, au) in a.iter_mut().enumerate() {
                add(au, pi, si + u, p[s + u]);
            }
            s += slots;
            pi += step_pages;
            si += step_slots;
            if si >= bs {
                si -= bs;
                pi += 1;
            }
        }
        // The last, partial step.
        for (u, au) in a.iter_mut().enumerate() {
            if s + u < n {
                add(au, pi, si + u, p[s + u]);
            }
        }
        for (u, au) in a.iter().enumerate() {
            let dst = &mut acc[(j + u) * hd..(j + u + 1) * hd];
            for (c, ac) in au.iter().enumerate() {
                // SAFETY: `dst` holds NV * 16 values.
                unsafe { _mm512_storeu_ps(dst.as_mut_ptr().add(c * LANES), *ac) };
            }
        }
    }
}

/// Checks against the portable loops live in `super::attn`'s tests; this one pins the
/// butterfly's lane order by itself.
#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn butterfly_sums_each_input_in_reduce_order() {
        if !available() {
            eprintln!("no AVX-512F here: the butterfly is not exercised");
            return;
        }
        let vals: Vec<[f32; 16]> = (0..16)
            .map(|p| {
                std::array::from_fn(|l| {
                    ((p * 37 + l * 11) % 23) as f32 * 0.37 - 3.1 + (l as f32) * 1e-3
                })
            })
            .collect();
        let mut z = [unsafe { _mm512_setzero_ps() }; LANES];
        for (g, v) in vals.iter().enumerate() {
            // SAFETY: `v` holds 16 values; AVX-512F is present (checked above).
            z[PERM[g]] = unsafe { _mm512_loadu_ps(v.as_ptr()) };
        }
        let mut got = [0.0f32; 16];
        // SAFETY: as above; `got` holds 16 values.
        unsafe { _mm512_storeu_ps(got.as_mut_ptr(), butterfly(&z)) };
        for (g, v) in vals.iter().enumerate() {
            assert_eq!(
                got[g].to_bits(),
                super::super::reduce16(v).to_bits(),
                "position {g}"
            );
        }
    }
}

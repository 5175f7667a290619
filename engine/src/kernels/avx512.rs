//! AVX-512 (F, BW, VNNI) multi-token integer dot products: one weight row against a
//! group of up to 16 tokens, two tokens per 512-bit register.
//!
//! Each 256-bit half of a register does exactly what the AVX2 kernel does for one token
//! (the same integer block sums, `fmadd(d_w * d_x, sum, acc)` per block, the same final
//! horizontal sum), so every token's result has the same bits as the single-token path.
#![allow(unsafe_code)]

use super::super::quant::QuantKind;
use super::avx2::{f16_to_f32, hsum, nibbles};
use super::packed::{PackedGroup, GROUP};
use std::arch::x86_64::*;

pub(super) fn available() -> bool {
    static AVAILABLE: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *AVAILABLE.get_or_init(|| {
        super::avx2::available()
            && is_x86_feature_detected!("avx512f")
            && is_x86_feature_detected!("avx512bw")
            && is_x86_feature_detected!("avx512vnni")
    })
}

/// `out[t] = row . x[t]` for the tokens of `g` (`out[g.len..]` is scratch).
pub(super) fn group_dot(kind: QuantKind, row: &[u8], g: &PackedGroup, out: &mut [f32; GROUP]) {
    let nb = g.d.len();
    assert!(
        row.len() >= nb * kind.block_bytes()
            && g.s.len() == nb
            && g.qs.len() == nb * g.pairs
            && (1..=GROUP / 2).contains(&g.pairs)
    );
    macro_rules! dispatch {
        ($f:ident) => {
            // SAFETY: only called after `available()` returned true; the assert bounds
            // every block of `row` and of `g` the kernel reads.
            unsafe {
                match g.pairs {
                    1 => $f::<1>(kind, row, g, out),
                    2 => $f::<2>(kind, row, g, out),
                    3 => $f::<3>(kind, row, g, out),
                    4 => $f::<4>(kind, row, g, out),
                    5 => $f::<5>(kind, row, g, out),
                    6 => $f::<6>(kind, row, g, out),
                    7 => $f::<7>(kind, row, g, out),
                    _ => $f::<8>(kind, row, g, out),
                }
            }
        };
    }
    match kind {
        QuantKind::Q4_1 => dispatch!(q4_1_impl),
        QuantKind::Q4_0 | QuantKind::Q8_0 => dispatch!(signed_impl),
    }
}

/// Lane `l` of the result takes token `2p + l / 8` of a per-token vector.
#[inline]
#[target_feature(enable = "avx512f,avx512bw,avx512vnni,avx2,fma,f16c")]
fn pair_index(p: usize) -> __m512i {
    let (a, b) = (2 * p as i32, 2 * p as i32 + 1);
    _mm512_set_epi32(b, b, b, b, b, b, b, b, a, a, a, a, a, a, a, a)
}

/// The two 8-lane halves of `acc`, each summed as the AVX2 kernel sums its accumulator.
#[inline]
#[target_feature(enable = "avx512f,avx512bw,avx512vnni,avx2,fma,f16c")]
fn halves(acc: __m512) -> (f32, f32) {
    let lo = _mm512_castps512_ps256(acc);
    let hi = _mm256_castpd_ps(_mm512_extractf64x4_pd::<1>(_mm512_castps_pd(acc)));
    (hsum(lo), hsum(hi))
}

#[target_feature(enable = "avx512f,avx512bw,avx512vnni,avx2,fma,f16c")]
fn q4_1_impl<const P: usize>(
    _kind: QuantKind,
    row: &[u8],
    g: &PackedGroup,
    out: &mut [f32; GROUP],
) {
    let idx: [__m512i; P] = std::array::from_fn(|p| pair_index(p));
    let mut acc = [_mm512_setzero_ps(); P];
    let mut mins = _mm512_setzero_ps();
    let base = row.as_ptr();
    for i in 0..g.d.len() {
        // SAFETY: block i lies inside `row` (length asserted by `group_dot`).
        let blk = unsafe { base.add(i * 20) };
        let dw = _mm512_set1_ps(f16_to_f32(blk));
        // SAFETY: the min follows the scale inside the block.
        let m = _mm512_set1_ps(f16_to_f32(unsafe { blk.add(2) }));
        // SAFETY: the 16 nibble bytes follow scale and min inside the block.
        let qx = _mm512_broadcast_i64x4(nibbles(unsafe { blk.add(4) }));
        // SAFETY: `d` and `s` hold one aligned 64-byte vector per block.
        let (dx, sx) = unsafe {
            (
                _mm512_load_ps(g.d[i].0.as_ptr()),
                _mm512_load_ps(g.s[i].0.as_ptr()),
            )
        };
        mins = _mm512_add_ps(mins, _mm512_mul_ps(m, sx));
        let qs = &g.qs[i * P..(i + 1) * P];
        for p in 0..P {
            // SAFETY: each pair is an aligned 64-byte array.
            let qy = unsafe { _mm512_load_si512(qs[p].0.as_ptr() as *const __m512i) };
            let dot = _mm512_dpbusd_epi32(_mm512_setzero_si512(), qx, qy);
            let d = _mm512_mul_ps(dw, _mm512_permutexvar_ps(idx[p], dx));
            acc[p] = _mm512_fmadd_ps(d, _mm512_cvtepi32_ps(dot), acc[p]);
        }
    }
    let mut mn = [0.0f32; GROUP];
    // SAFETY: `mn` holds 16 floats.
    unsafe { _mm512_storeu_ps(mn.as_mut_ptr(), mins) };
    for (p, &a) in acc.iter().enumerate() {
        let (lo, hi) = halves(a);
        out[2 * p] = lo + mn[2 * p];
        out[2 * p + 1] = hi + mn[2 * p + 1];
    }
}

/// `Q8_0` and `Q4_0` (signed weights): the integer sums use `|w| * (x with w's sign)`,
/// as the AVX2 kernels' `sign_epi8` trick does (no product pair can saturate).
#[target_feature(enable = "avx512f,avx512bw,avx512vnni,avx2,fma,f16c")]
fn signed_impl<const P: usize>(
    kind: QuantKind,
    row: &[u8],
    g: &PackedGroup,
    out: &mut [f32; GROUP],
) {
    let q8 = kind == QuantKind::Q8_0;
    let bb = kind.block_bytes();
    let idx: [__m512i; P] = std::array::from_fn(|p| pair_index(p));
    let mut acc = [_mm512_setzero_ps(); P];
    let base = row.as_ptr();
    let zero = _mm512_setzero_si512();
    for i in 0..g.d.len() {
        // SAFETY: block i lies inside `row` (length asserted by `group_dot`).
        let blk = unsafe { base.add(i * bb) };
        let dw = _mm512_set1_ps(f16_to_f32(blk));
        let w = if q8 {
            // SAFETY: the 32 quant bytes follow the 2-byte scale inside the block.
            unsafe { _mm256_loadu_si256(blk.add(2) as *const __m256i) }
        } else {
            // SAFETY: the 16 nibble bytes follow the 2-byte scale inside the block.
            _mm256_sub_epi8(nibbles(unsafe { blk.add(2) }), _mm256_set1_epi8(8))
        };
        let w = _mm512_broadcast_i64x4(w);
        let wabs = _mm512_abs_epi8(w);
        let neg = _mm512_movepi8_mask(w);
        // SAFETY: `d` holds one aligned 64-byte vector per block.
        let dx = unsafe { _mm512_load_ps(g.d[i].0.as_ptr()) };
        let qs = &g.qs[i * P..(i + 1) * P];
        for p in 0..P {
            // SAFETY: each pair is an aligned 64-byte array.
            let qy = unsafe { _mm512_load_si512(qs[p].0.as_ptr() as *const __m512i) };
            let sy = _mm512_mask_sub_epi8(qy, neg, zero, qy);
            let dot = _mm512_dpbusd_epi32(zero, wabs, sy);
            let d = _mm512_mul_ps(dw, _mm512_permutexvar_ps(idx[p], dx));
            acc[p] = _mm512_fmadd_ps(d, _mm512_cvtepi32_ps(dot), acc[p]);
        }
    }
    for (p, &a) in acc.iter().enumerate() {
        let (lo, hi) = halves(a);
        out[2 * p] = lo;
        out[2 * p + 1] = hi;
    }
}

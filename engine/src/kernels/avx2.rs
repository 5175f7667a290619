//! AVX2 + FMA + F16C integer dot products (the ggml `vec_dot_q*_q8` scheme).
#![allow(unsafe_code)]

use super::super::quant::{Q8Block, QuantKind, QK};
use std::arch::x86_64::*;

pub(super) fn available() -> bool {
    static AVAILABLE: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *AVAILABLE.get_or_init(|| {
        is_x86_feature_detected!("avx2")
            && is_x86_feature_detected!("fma")
            && is_x86_feature_detected!("f16c")
    })
}

pub(super) fn dot_q4_0(row: &[u8], x: &[Q8Block]) -> f32 {
    assert!(row.len() >= x.len() * QuantKind::Q4_0.block_bytes());
    // SAFETY: only installed by `qdot_for` after `available()` returned true; the assert
    // bounds every block read.
    unsafe { q4_0_impl(row, x) }
}

pub(super) fn dot_q4_1(row: &[u8], x: &[Q8Block]) -> f32 {
    assert!(row.len() >= x.len() * QuantKind::Q4_1.block_bytes());
    // SAFETY: as in `dot_q4_0`.
    unsafe { q4_1_impl(row, x) }
}

pub(super) fn dot_q8_0(row: &[u8], x: &[Q8Block]) -> f32 {
    assert!(row.len() >= x.len() * QuantKind::Q8_0.block_bytes());
    // SAFETY: as in `dot_q4_0`.
    unsafe { q8_0_impl(row, x) }
}

#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
pub(super) fn f16_to_f32(p: *const u8) -> f32 {
    // SAFETY: callers pass a pointer to two readable bytes inside a checked row.
    let bits = unsafe { std::ptr::read_unaligned(p as *const u16) };
    _mm_cvtss_f32(_mm_cvtph_ps(_mm_cvtsi32_si128(bits as i32)))
}

#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
pub(super) fn hsum(v: __m256) -> f32 {
    let lo = _mm256_castps256_ps128(v);
    let hi = _mm256_extractf128_ps(v, 1);
    let s = _mm_add_ps(lo, hi);
    let s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    let s = _mm_add_ss(s, _mm_movehdup_ps(s));
    _mm_cvtss_f32(s)
}

/// Unpacks 16 bytes of nibbles into 32 bytes (low nibbles first, then high nibbles).
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
pub(super) fn nibbles(p: *const u8) -> __m256i {
    // SAFETY: callers pass a pointer to 16 readable bytes inside a checked row.
    let tmp = unsafe { _mm_loadu_si128(p as *const __m128i) };
    let hi = _mm_srli_epi16(tmp, 4);
    _mm256_and_si256(_mm256_set_m128i(hi, tmp), _mm256_set1_epi8(0x0f))
}

/// Sum of signed-byte products in 8 lanes of i32, as f32.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
fn mul_sum_i8(a: __m256i, b: __m256i) -> __m256 {
    let ax = _mm256_sign_epi8(a, a);
    let sy = _mm256_sign_epi8(b, a);
    let dot = _mm256_maddubs_epi16(ax, sy);
    _mm256_cvtepi32_ps(_mm256_madd_epi16(dot, _mm256_set1_epi16(1)))
}

#[target_feature(enable = "avx2,fma,f16c")]
fn q4_0_impl(row: &[u8], x: &[Q8Block]) -> f32 {
    let mut acc = _mm256_setzero_ps();
    let base = row.as_ptr();
    for (i, y) in x.iter().enumerate() {
        // SAFETY: block i lies inside `row` (length asserted by the caller).
        let blk = unsafe { base.add(i * 18) };
        let d = f16_to_f32(blk) * y.d;
        // SAFETY: the 16 nibble bytes follow the 2-byte scale inside the block.
        let qx = _mm256_sub_epi8(nibbles(unsafe { blk.add(2) }), _mm256_set1_epi8(8));
        // SAFETY: `qs` is 32 bytes.
        let qy = unsafe { _mm256_loadu_si256(y.qs.as_ptr() as *const __m256i) };
        acc = _mm256_fmadd_ps(_mm256_set1_ps(d), mul_sum_i8(qx, qy), acc);
    }
    hsum(acc)
}

#[target_feature(enable = "avx2,fma,f16c")]
fn q4_1_impl(row: &[u8], x: &[Q8Block]) -> f32 {
    let mut acc = _mm256_setzero_ps();
    let mut mins = 0.0f32;
    let ones = _mm256_set1_epi16(1);
    let base = row.as_ptr();
    for (i, y) in x.iter().enumerate() {
        // SAFETY: block i lies inside `row` (length asserted by the caller).
        let blk = unsafe { base.add(i * 20) };
        let d = f16_to_f32(blk) * y.d;
        // SAFETY: the min follows the scale inside the block.
        mins += f16_to_f32(unsafe { blk.add(2) }) * y.s;
        // SAFETY: the 16 nibble bytes follow scale and min inside the block.
        let qx = nibbles(unsafe { blk.add(4) });
        // SAFETY: `qs` is 32 bytes.
        let qy = unsafe { _mm256_loadu_si256(y.qs.as_ptr() as *const __m256i) };
        let dot = _mm256_madd_epi16(_mm256_maddubs_epi16(qx, qy), ones);
        acc = _mm256_fmadd_ps(_mm256_set1_ps(d), _mm256_cvtepi32_ps(dot), acc);
    }
    hsum(acc) + mins
}

#[target_feature(enable = "avx2,fma,f16c")]
fn q8_0_impl(row: &[u8], x: &[Q8Block]) -> f32 {
    let mut acc = _mm256_setzero_ps();
    let base = row.as_ptr();
    for (i, y) in x.iter().enumerate() {
        // SAFETY: block i lies inside `row` (length asserted by the caller).
        let blk = unsafe { base.add(i * 34) };
        let d = f16_to_f32(blk) * y.d;
        // SAFETY: the 32 quant bytes follow the 2-byte scale inside the block.
        let qx = unsafe { _mm256_loadu_si256(blk.add(2) as *const __m256i) };
        // SAFETY: `qs` is 32 bytes.
        let qy = unsafe { _mm256_loadu_si256(y.qs.as_ptr() as *const __m256i) };
        acc = _mm256_fmadd_ps(_mm256_set1_ps(d), mul_sum_i8(qx, qy), acc);
    }
    hsum(acc)
}

pub(super) fn dot_f32(a: &[f32], b: &[f32]) -> f32 {
    let n = a.len().min(b.len());
    // SAFETY: only called after `available()` returned true; reads stay below `n`.
    unsafe { dot_f32_impl(&a[..n], &b[..n]) }
}

#[target_feature(enable = "avx2,fma,f16c")]
fn dot_f32_impl(a: &[f32], b: &[f32]) -> f32 {
    let n = a.len();
    let (mut acc0, mut acc1) = (_mm256_setzero_ps(), _mm256_setzero_ps());
    let mut i = 0;
    while i + 16 <= n {
        // SAFETY: i + 16 <= n = a.len() = b.len().
        unsafe {
            let (pa, pb) = (a.as_ptr().add(i), b.as_ptr().add(i));
            acc0 = _mm256_fmadd_ps(_mm256_loadu_ps(pa), _mm256_loadu_ps(pb), acc0);
            acc1 = _mm256_fmadd_ps(_mm256_loadu_ps(pa.add(8)), _mm256_loadu_ps(pb.add(8)), acc1);
        }
        i += 16;
    }
    while i + 8 <= n {
        // SAFETY: i + 8 <= n.
        unsafe {
            let (pa, pb) = (a.as_ptr().add(i), b.as_ptr().add(i));
            acc0 = _mm256_fmadd_ps(_mm256_loadu_ps(pa), _mm256_loadu_ps(pb), acc0);
        }
        i += 8;
    }
    let mut s = hsum(_mm256_add_ps(acc0, acc1));
    while i < n {
        s += a[i] * b[i];
        i += 1;
    }
    s
}

/// Four activations at once against one `Q4_1` row: `x` holds 4 rows of `nb` blocks.
pub(super) fn dot_q4_1_x4(row: &[u8], x: &[Q8Block]) -> [f32; 4] {
    let nb = x.len() / 4;
    assert!(row.len() >= nb * QuantKind::Q4_1.block_bytes() && x.len() == nb * 4);
    // SAFETY: as in `dot_q4_0`; the assert bounds every block read.
    unsafe { q4_1_x4_impl(row, x, nb) }
}

#[target_feature(enable = "avx2,fma,f16c")]
fn q4_1_x4_impl(row: &[u8], x: &[Q8Block], nb: usize) -> [f32; 4] {
    let mut acc = [_mm256_setzero_ps(); 4];
    let mut mins = [0.0f32; 4];
    let ones = _mm256_set1_epi16(1);
    let base = row.as_ptr();
    for i in 0..nb {
        // SAFETY: block i lies inside `row` (length asserted by the caller).
        let blk = unsafe { base.add(i * 20) };
        let d = f16_to_f32(blk);
        // SAFETY: the min follows the scale inside the block.
        let m = f16_to_f32(unsafe { blk.add(2) });
        // SAFETY: the 16 nibble bytes follow scale and min inside the block.
        let qx = nibbles(unsafe { blk.add(4) });
        for j in 0..4 {
            let y = &x[j * nb + i];
            mins[j] += m * y.s;
            // SAFETY: `qs` is 32 bytes.
            let qy = unsafe { _mm256_loadu_si256(y.qs.as_ptr() as *const __m256i) };
            let dot = _mm256_madd_epi16(_mm256_maddubs_epi16(qx, qy), ones);
            acc[j] = _mm256_fmadd_ps(_mm256_set1_ps(d * y.d), _mm256_cvtepi32_ps(dot), acc[j]);
        }
    }
    [
        hsum(acc[0]) + mins[0],
        hsum(acc[1]) + mins[1],
        hsum(acc[2]) + mins[2],
        hsum(acc[3]) + mins[3],
    ]
}

/// `dst[i] = src[i]` widened from f16 (`dst.len() == src.len()`), 8 at a time.
pub(super) fn widen_f16(src: &[half::f16], dst: &mut [f32]) {
    assert_eq!(src.len(), dst.len());
    // SAFETY: only called after `available()` returned true; lengths checked above.
    unsafe { widen_f16_impl(src, dst) }
}

#[target_feature(enable = "avx2,fma,f16c")]
fn widen_f16_impl(src: &[half::f16], dst: &mut [f32]) {
    let full = src.len() / 8 * 8;
    for i in (0..full).step_by(8) {
        // SAFETY: i + 8 <= full <= len of both slices.
        unsafe {
            let h = _mm_loadu_si128(src.as_ptr().add(i).cast());
            _mm256_storeu_ps(dst.as_mut_ptr().add(i), _mm256_cvtph_ps(h));
        }
    }
    for (d, s) in dst[full..].iter_mut().zip(&src[full..]) {
        *d = s.to_f32();
    }
}

/// `gate = silu(gate) * up` with ggml's vectorised `expf`, 8 lanes at a time (lane-wise
/// identical to `swiglu_portable`).
pub(super) fn swiglu(gate: &mut [f32], up: &[f32]) {
    assert!(gate.len() == up.len() && gate.len().is_multiple_of(8));
    // SAFETY: only called after `available()` returned true; lengths checked above.
    unsafe { swiglu_impl(gate, up) }
}

#[target_feature(enable = "avx2,fma,f16c")]
fn expf8(x: __m256) -> __m256 {
    let r = _mm256_set1_ps(f32::from_bits(0x4b40_0000));
    let z = _mm256_fmadd_ps(x, _mm256_set1_ps(f32::from_bits(0x3fb8_aa3b)), r);
    let n = _mm256_sub_ps(z, r);
    let b = _mm256_fnmadd_ps(
        n,
        _mm256_set1_ps(f32::from_bits(0x35bf_be8e)),
        _mm256_fnmadd_ps(n, _mm256_set1_ps(f32::from_bits(0x3f31_7200)), x),
    );
    let u = _mm256_mul_ps(b, b);
    let p1 = _mm256_fmadd_ps(
        _mm256_set1_ps(f32::from_bits(0x3c07_2010)),
        b,
        _mm256_set1_ps(f32::from_bits(0x3d2b_9f17)),
    );
    let p2 = _mm256_fmadd_ps(
        _mm256_set1_ps(f32::from_bits(0x3e2a_af33)),
        b,
        _mm256_set1_ps(f32::from_bits(0x3eff_fedb)),
    );
    let p3 = _mm256_fmadd_ps(
        _mm256_set1_ps(f32::from_bits(0x3f7f_fff6)),
        b,
        _mm256_set1_ps(1.0),
    );
    let j = _mm256_fmadd_ps(_mm256_fmadd_ps(p1, u, p2), u, p3);
    // scalef(j, n) = j * 2^(n/2) * 2^(n - n/2), one rounding; |n| > 192 saturates.
    let big = _mm256_cmp_ps(
        _mm256_andnot_ps(_mm256_set1_ps(-0.0), n),
        _mm256_set1_ps(192.0),
        _CMP_GT_OQ,
    );
    let nc = _mm256_min_ps(
        _mm256_max_ps(n, _mm256_set1_ps(-192.0)),
        _mm256_set1_ps(192.0),
    );
    let ni = _mm256_cvtps_epi32(nc);
    // Arithmetic shift: n / 2 rounded toward -inf; any split works as both halves stay normal.
    let n1 = _mm256_srai_epi32(ni, 1);
    let n2 = _mm256_sub_epi32(ni, n1);
    let bias = _mm256_set1_epi32(127);
    let p2a = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(n1, bias), 23));
    let p2b = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(n2, bias), 23));
    let res = _mm256_mul_ps(_mm256_mul_ps(j, p2a), p2b);
    let alt = _mm256_and_ps(
        _mm256_cmp_ps(n, _mm256_setzero_ps(), _CMP_GT_OQ),
        _mm256_set1_ps(f32::INFINITY),
    );
    _mm256_blendv_ps(res, alt, big)
}

#[target_feature(enable = "avx2,fma,f16c")]
fn swiglu_impl(gate: &mut [f32], up: &[f32]) {
    let one = _mm256_set1_ps(1.0);
    for (g, u) in gate.chunks_exact_mut(8).zip(up.chunks_exact(8)) {
        // SAFETY: both chunks hold exactly 8 floats.
        unsafe {
            let x = _mm256_loadu_ps(g.as_ptr());
            let e = expf8(_mm256_sub_ps(_mm256_setzero_ps(), x));
            let s = _mm256_div_ps(x, _mm256_add_ps(one, e));
            let y = _mm256_mul_ps(s, _mm256_loadu_ps(u.as_ptr()));
            _mm256_storeu_ps(g.as_mut_ptr(), y);
        }
    }
}

/// `xs[i] = exp(xs[i] - max)` with ggml's vectorised `expf`.
pub(super) fn exp_sub(xs: &mut [f32], max: f32) {
    assert!(xs.len().is_multiple_of(8));
    // SAFETY: only called after `available()` returned true; length checked above.
    unsafe { exp_sub_impl(xs, max) }
}

#[target_feature(enable = "avx2,fma,f16c")]
fn exp_sub_impl(xs: &mut [f32], max: f32) {
    let m = _mm256_set1_ps(max);
    for c in xs.chunks_exact_mut(8) {
        // SAFETY: the chunk holds exactly 8 floats.
        unsafe {
            let x = _mm256_sub_ps(_mm256_loadu_ps(c.as_ptr()), m);
            _mm256_storeu_ps(c.as_mut_ptr(), expf8(x));
        }
    }
}

/// Runs `f` in an AVX2 + FMA + F16C context (see `kernels::with_simd`).
pub(super) fn run<R>(f: impl FnOnce() -> R) -> R {
    // SAFETY: only called after `available()` returned true.
    unsafe { run_impl(f) }
}

#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
fn run_impl<R>(f: impl FnOnce() -> R) -> R {
    f()
}

/// [`crate::quant::quantize_activation`] 8 lanes at a time, as ggml's AVX2
/// `quantize_row_q8_1` computes it (same bits as the scalar version).
pub(super) fn quantize_q8_1(x: &[f32], out: &mut [Q8Block]) {
    assert!(x.len() == out.len() * QK);
    // SAFETY: only called after `available()` returned true; lengths checked above.
    unsafe { quantize_impl(x, out) }
}

#[target_feature(enable = "avx2,fma,f16c")]
fn quantize_impl(x: &[f32], out: &mut [Q8Block]) {
    let sign = _mm256_set1_ps(-0.0);
    for (blk, o) in x.chunks_exact(QK).zip(out) {
        // SAFETY: the chunk holds exactly 32 floats.
        let v: [__m256; 4] =
            std::array::from_fn(|j| unsafe { _mm256_loadu_ps(blk.as_ptr().add(8 * j)) });
        let m = v.iter().fold(_mm256_setzero_ps(), |m, &x| {
            _mm256_max_ps(m, _mm256_andnot_ps(sign, x))
        });
        let mut lanes = [0.0f32; 8];
        // SAFETY: `lanes` holds 8 floats.
        unsafe { _mm256_storeu_ps(lanes.as_mut_ptr(), m) };
        let amax = lanes.iter().fold(0.0f32, |a, &b| a.max(b));
        let d = amax / 127.0;
        let id = _mm256_set1_ps(if amax != 0.0 { 127.0 / amax } else { 0.0 });
        let q: [__m256i; 4] = std::array::from_fn(|j| {
            let r = _mm256_round_ps::<{ _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC }>(
                _mm256_mul_ps(v[j], id),
            );
            _mm256_cvtps_epi32(r)
        });
        let sum = _mm256_add_epi32(_mm256_add_epi32(q[0], q[1]), _mm256_add_epi32(q[2], q[3]));
        let mut ints = [0i32; 8];
        // SAFETY: `ints` holds 8 i32.
        unsafe { _mm256_storeu_si256(ints.as_mut_ptr() as *mut __m256i, sum) };
        let total: i32 = ints.iter().sum();
        // Saturating packs interleave 128-bit lanes; the permutation restores the order.
        let p16a = _mm256_packs_epi32(q[0], q[1]);
        let p16b = _mm256_packs_epi32(q[2], q[3]);
        let p8 = _mm256_packs_epi16(p16a, p16b);
        let p8 = _mm256_permutevar8x32_epi32(p8, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
        // SAFETY: `qs` is 32 bytes.
        unsafe { _mm256_storeu_si256(o.qs.as_mut_ptr() as *mut __m256i, p8) };
        o.d = half::f16::from_f32(d).to_f32();
        o.s = half::f16::from_f32(d * total as f32).to_f32();
    }
}

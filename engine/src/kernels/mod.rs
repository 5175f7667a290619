//! Dot-product kernels: portable scalar code, AVX2 versions, and AVX-512 VNNI multi-token
//! versions for batched steps, picked at run time (`WARMPATH_NO_AVX512=1` keeps AVX2).

use super::quant::{f16_at, quantize_block, Q8Block, QuantKind, QK};

pub(crate) mod attn;
#[cfg(target_arch = "x86_64")]
mod attn_avx512;
#[cfg(target_arch = "x86_64")]
mod avx2;
#[cfg(target_arch = "x86_64")]
mod avx512;
mod packed;
mod rows;

pub(crate) use packed::{Packed, PackedGroup, GROUP};

/// One weight row against the tokens of a [`PackedGroup`] (`out[t]` for `t < len`).
pub(crate) type GroupDotFn = fn(QuantKind, &[u8], &PackedGroup, &mut [f32; GROUP]);

/// The multi-token kernel, when this CPU has AVX-512 (F, BW, VNNI) and the environment
/// variable `WARMPATH_NO_AVX512` is unset (set it to compare with the AVX2 path).
pub(crate) fn group_dot_fn() -> Option<GroupDotFn> {
    #[cfg(target_arch = "x86_64")]
    {
        static ON: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
        if *ON
            .get_or_init(|| avx512::available() && std::env::var_os("WARMPATH_NO_AVX512").is_none())
        {
            return Some(avx512::group_dot);
        }
    }
    None
}

/// Quantises rows of activations block by block (`out.len() == x.len() / 32`): the same
/// bits as [`super::quant::quantize_activation`], with AVX2 when available.
pub(crate) fn quantize_rows(x: &[f32], out: &mut [Q8Block]) {
    #[cfg(target_arch = "x86_64")]
    if avx2::available() {
        avx2::quantize_q8_1(x, out);
        return;
    }
    for (blk, o) in x.chunks_exact(QK).zip(out) {
        *o = quantize_block(blk);
    }
}

/// `dot(weight row, quantised activation)` for one quantised format.
pub(crate) type QDotFn = fn(&[u8], &[Q8Block]) -> f32;

/// The fastest available integer dot product for `kind` on this CPU.
pub(crate) fn qdot_for(kind: QuantKind) -> QDotFn {
    #[cfg(target_arch = "x86_64")]
    if avx2::available() {
        return match kind {
            QuantKind::Q4_0 => avx2::dot_q4_0,
            QuantKind::Q4_1 => avx2::dot_q4_1,
            QuantKind::Q8_0 => avx2::dot_q8_0,
        };
    }
    match kind {
        QuantKind::Q4_0 => dot_q4_0_scalar,
        QuantKind::Q4_1 => dot_q4_1_scalar,
        QuantKind::Q8_0 => dot_q8_0_scalar,
    }
}

/// Four activations (`x` = 4 rows of blocks, back to back) against one weight row.
pub(crate) type QDot4Fn = fn(&[u8], &[Q8Block]) -> [f32; 4];

/// A 4-input kernel for `kind`, when this CPU has one.
pub(crate) fn qdot4_for(kind: QuantKind) -> Option<QDot4Fn> {
    #[cfg(target_arch = "x86_64")]
    if avx2::available() && kind == QuantKind::Q4_1 {
        return Some(avx2::dot_q4_1_x4);
    }
    let _ = kind;
    None
}

/// `dst[i] = src[i]` widened from f16 (F16C when available).
#[inline]
pub(crate) fn widen_f16(src: &[half::f16], dst: &mut [f32]) {
    #[cfg(target_arch = "x86_64")]
    if avx2::available() {
        avx2::widen_f16(src, dst);
        return;
    }
    use half::slice::HalfFloatSliceExt;
    src.convert_to_f32_slice(dst);
}

/// f32 dot product (AVX2 when available).
pub(crate) fn dot_f32(a: &[f32], b: &[f32]) -> f32 {
    #[cfg(target_arch = "x86_64")]
    if avx2::available() {
        return avx2::dot_f32(a, b);
    }
    dot_f32_portable(a, b)
}

/// f32 dot product written so LLVM vectorises it (8 independent accumulators).
pub(crate) fn dot_f32_portable(a: &[f32], b: &[f32]) -> f32 {
    let mut acc = [0.0f32; 8];
    let (ac, bc) = (a.chunks_exact(8), b.chunks_exact(8));
    let tail: f32 = ac
        .remainder()
        .iter()
        .zip(bc.remainder())
        .map(|(x, y)| x * y)
        .sum();
    for (x, y) in ac.zip(bc) {
        for i in 0..8 {
            acc[i] += x[i] * y[i];
        }
    }
    acc.iter().sum::<f32>() + tail
}

/// Runs `f` inside a function compiled for AVX2 + FMA when the CPU has them, so code
/// inlined into `f` uses 256-bit registers. Results do not change: Rust never contracts
/// `a * b + c` into an FMA on its own.
#[inline]
pub(crate) fn with_simd<R>(f: impl FnOnce() -> R) -> R {
    #[cfg(target_arch = "x86_64")]
    if avx2::available() {
        return avx2::run(f);
    }
    f()
}

/// Horizontal sum of 16 lanes in the order of GCC's `_mm512_reduce_add_ps`.
#[inline(always)]
pub(crate) fn reduce16(a: &[f32; 16]) -> f32 {
    let mut t8 = [0.0f32; 8];
    for (i, t) in t8.iter_mut().enumerate() {
        *t = a[i + 8] + a[i];
    }
    let t4: [f32; 4] = std::array::from_fn(|i| t8[i + 4] + t8[i]);
    (t4[0] + t4[2]) + (t4[1] + t4[3])
}

/// ggml's vectorised `expf` (`ggml_v_expf`, ARM optimized-routines polynomial, within
/// 1.5 ulp), computed lane by lane so results equal llama.cpp's bit for bit.
pub(crate) fn expf_ggml(x: f32) -> f32 {
    let r = f32::from_bits(0x4b40_0000); // 0x1.8p23
    let z = x.mul_add(f32::from_bits(0x3fb8_aa3b), r); // log2(e)
    let n = z - r;
    let b = (-n).mul_add(
        f32::from_bits(0x35bf_be8e),                  // 0x1.7f7d1cp-20
        (-n).mul_add(f32::from_bits(0x3f31_7200), x), // 0x1.62e4p-1
    );
    if n.abs() > 192.0 {
        return if n <= 0.0 { 0.0 } else { f32::INFINITY };
    }
    let u = b * b;
    let j = f32::from_bits(0x3c07_2010)
        .mul_add(b, f32::from_bits(0x3d2b_9f17))
        .mul_add(
            u,
            f32::from_bits(0x3e2a_af33).mul_add(b, f32::from_bits(0x3eff_fedb)),
        )
        .mul_add(u, f32::from_bits(0x3f7f_fff6).mul_add(b, 1.0));
    scalef(j, n as i32)
}

/// `j * 2^n` with one rounding (AVX-512 `scalef` for the range `expf_ggml` uses).
pub(crate) fn scalef(j: f32, n: i32) -> f32 {
    let n1 = n / 2;
    let pow2 = |k: i32| f32::from_bits(((k + 127) as u32) << 23);
    j * pow2(n1) * pow2(n - n1)
}

/// `xs[i] = expf_ggml(xs[i] - max)` (SIMD when available, same bits either way).
pub(crate) fn exp_sub(xs: &mut [f32], max: f32) {
    let full = xs.len() / 8 * 8;
    #[cfg(target_arch = "x86_64")]
    let done = if avx2::available() {
        avx2::exp_sub(&mut xs[..full], max);
        full
    } else {
        0
    };
    #[cfg(not(target_arch = "x86_64"))]
    let done = 0;
    for x in &mut xs[done..] {
        *x = expf_ggml(*x - max);
    }
}

/// `gate[i] = silu(gate[i]) * up[i]` as ggml's `ggml_vec_swiglu_f32` computes it: 16-wide
/// blocks with [`expf_ggml`], the tail with the C library's `expf`.
pub(crate) fn swiglu(gate: &mut [f32], up: &[f32]) {
    let full = gate.len() / 16 * 16;
    #[cfg(target_arch = "x86_64")]
    if avx2::available() {
        avx2::swiglu(&mut gate[..full], &up[..full]);
    } else {
        swiglu_portable(&mut gate[..full], &up[..full]);
    }
    #[cfg(not(target_arch = "x86_64"))]
    swiglu_portable(&mut gate[..full], &up[..full]);
    for (g, &u) in gate[full..].iter_mut().zip(&up[full..]) {
        *g = *g / (1.0 + (-*g).exp()) * u;
    }
}

pub(crate) fn swiglu_portable(gate: &mut [f32], up: &[f32]) {
    for (g, &u) in gate.iter_mut().zip(up) {
        *g = *g / (1.0 + expf_ggml(0.0 - *g)) * u;
    }
}

pub(crate) fn dot_q4_0_scalar(row: &[u8], x: &[Q8Block]) -> f32 {
    let bb = QuantKind::Q4_0.block_bytes();
    let mut sum = 0.0f32;
    for (blk, y) in row.chunks_exact(bb).zip(x) {
        let mut acc = 0i32;
        for j in 0..QK / 2 {
            let q = blk[2 + j];
            acc += ((q & 0x0f) as i32 - 8) * y.qs[j] as i32;
            acc += ((q >> 4) as i32 - 8) * y.qs[j + 16] as i32;
        }
        sum += f16_at(blk, 0) * y.d * acc as f32;
    }
    sum
}

pub(crate) fn dot_q4_1_scalar(row: &[u8], x: &[Q8Block]) -> f32 {
    let bb = QuantKind::Q4_1.block_bytes();
    let mut sum = 0.0f32;
    for (blk, y) in row.chunks_exact(bb).zip(x) {
        let mut acc = 0i32;
        for j in 0..QK / 2 {
            let q = blk[4 + j];
            acc += (q & 0x0f) as i32 * y.qs[j] as i32;
            acc += (q >> 4) as i32 * y.qs[j + 16] as i32;
        }
        sum += f16_at(blk, 0) * y.d * acc as f32 + f16_at(blk, 2) * y.s;
    }
    sum
}

pub(crate) fn dot_q8_0_scalar(row: &[u8], x: &[Q8Block]) -> f32 {
    let bb = QuantKind::Q8_0.block_bytes();
    let mut sum = 0.0f32;
    for (blk, y) in row.chunks_exact(bb).zip(x) {
        let acc: i32 = blk[2..]
            .iter()
            .zip(&y.qs)
            .map(|(&a, &b)| a as i8 as i32 * b as i32)
            .sum();
        sum += f16_at(blk, 0) * y.d * acc as f32;
    }
    sum
}

#[cfg(test)]
mod tests {
    use super::super::quant::{quantize_activation, quantize_row};
    use super::*;
    use warmpath_core::rng::{Draw, SeedableRng, SplitMix64};

    #[test]
    fn widening_f16_is_exact_at_any_length() {
        for n in [0, 1, 7, 8, 9, 64, 67] {
            let src: Vec<half::f16> = (0..n)
                .map(|i| half::f16::from_f32((i as f32 - 30.0) * 0.731 + 1e-5 * i as f32))
                .collect();
            let mut got = vec![f32::NAN; n];
            widen_f16(&src, &mut got);
            let want: Vec<f32> = src.iter().map(|h| h.to_f32()).collect();
            assert_eq!(got, want, "n={n}");
        }
    }

    #[test]
    fn ggml_expf_is_accurate_and_simd_matches() {
        for i in -1600..1600 {
            let x = i as f32 * 0.0537;
            let (a, b) = (expf_ggml(x), x.exp());
            assert!(
                (a - b).abs() <= 3e-7 * b.max(f32::MIN_POSITIVE),
                "{x}: {a} vs {b}"
            );
        }
        assert_eq!(expf_ggml(f32::NEG_INFINITY), 0.0);
        assert_eq!(expf_ggml(-200.0), 0.0);
        let g: Vec<f32> = (0..64).map(|i| (i as f32 - 30.0) * 0.37).collect();
        let u: Vec<f32> = (0..64).map(|i| (i as f32 * 0.11).cos()).collect();
        let (mut a, mut b) = (g.clone(), g.clone());
        swiglu(&mut a, &u);
        swiglu_portable(&mut b, &u);
        assert_eq!(a, b);
        let mut e: Vec<f32> = (0..40).map(|i| i as f32 * -2.9).collect();
        let want: Vec<f32> = e.iter().map(|&x| expf_ggml(x - 1.5)).collect();
        exp_sub(&mut e, 1.5);
        assert_eq!(e, want);
    }

    /// Deterministic pseudo-random values in `[-1, 1)` with a few large outliers.
    fn values(n: usize, seed: u64) -> Vec<f32> {
        let mut r = SplitMix64::seed_from_u64(seed);
        (0..n)
            .map(|i| {
                let v = r.next_f32() * 2.0 - 1.0;
                if i % 97 == 5 {
                    v * 40.0
                } else {
                    v
                }
            })
            .collect()
    }

    #[test]
    fn simd_quantisation_has_the_scalar_bits() {
        let mut x = values(32 * 40, 3);
        x[64..96].iter_mut().for_each(|v| *v = 0.0);
        x[100] = 0.5 / 127.0 * 3.0; // ties under the block's scale
        let mut want = Vec::new();
        quantize_activation(&x, &mut want);
        let mut got = vec![want[0]; want.len()];
        quantize_rows(&x, &mut got);
        for (a, b) in got.iter().zip(&want) {
            assert_eq!(
                (a.d.to_bits(), a.s.to_bits(), a.qs),
                (b.d.to_bits(), b.s.to_bits(), b.qs)
            );
        }
    }

    #[test]
    fn group_kernels_have_the_single_token_bits() {
        let Some(group) = group_dot_fn() else {
            eprintln!("no AVX-512 VNNI on this CPU: the group kernels are not used here");
            return;
        };
        let (rows, cols) = (5, 192);
        let nb = cols / QK;
        for kind in [QuantKind::Q4_0, QuantKind::Q4_1, QuantKind::Q8_0] {
            let mut w = Vec::new();
            quantize_row(kind, &values(rows * cols, 11), &mut w);
            for n in [1, 2, 3, 7, 16, 17, 33] {
                let mut xq = Vec::new();
                quantize_activation(&values(n * cols, n as u64), &mut xq);
                let packed = Packed::new(&xq, n, nb);
                for wrow in w.chunks_exact(kind.row_bytes(cols)) {
                    let mut got = Vec::new();
                    for g in &packed.groups {
                        let mut buf = [0.0; GROUP];
                        group(kind, wrow, g, &mut buf);
                        got.extend_from_slice(&buf[..g.len]);
                    }
                    let want: Vec<f32> = xq
                        .chunks_exact(nb)
                        .map(|x| qdot_for(kind)(wrow, x))
                        .collect();
                    let bits = |v: &[f32]| v.iter().map(|f| f.to_bits()).collect::<Vec<_>>();
                    assert_eq!(bits(&got), bits(&want), "{kind:?} n={n}");
                }
            }
        }
    }

    #[test]
    fn f32_dot_matches_portable() {
        for n in [0, 1, 7, 8, 15, 16, 17, 64, 100] {
            let a: Vec<f32> = (0..n).map(|i| (i as f32 * 0.37).sin()).collect();
            let b: Vec<f32> = (0..n).map(|i| (i as f32 * 0.11).cos()).collect();
            let (x, y) = (dot_f32(&a, &b), dot_f32_portable(&a, &b));
            let naive: f32 = a.iter().zip(&b).map(|(p, q)| p * q).sum();
            assert!(
                (x - y).abs() < 1e-4 && (x - naive).abs() < 1e-4,
                "n={n}: {x} {y} {naive}"
            );
        }
    }

    #[test]
    fn simd_kernels_match_scalar() {
        let w: Vec<f32> = (0..256)
            .map(|i| ((i * 7919 % 97) as f32 - 48.0) / 50.0)
            .collect();
        let x: Vec<f32> = (0..256)
            .map(|i| ((i * 104729 % 89) as f32 - 44.0) / 30.0)
            .collect();
        let mut xq = Vec::new();
        quantize_activation(&x, &mut xq);
        let scalar: [(QuantKind, QDotFn); 3] = [
            (QuantKind::Q4_0, dot_q4_0_scalar),
            (QuantKind::Q4_1, dot_q4_1_scalar),
            (QuantKind::Q8_0, dot_q8_0_scalar),
        ];
        for (kind, f) in scalar {
            let mut row = Vec::new();
            quantize_row(kind, &w, &mut row);
            let a = f(&row, &xq);
            let b = qdot_for(kind)(&row, &xq);
            assert!(
                (a - b).abs() <= 1e-3 * a.abs().max(1.0),
                "{kind:?}: {a} vs {b}"
            );
            if let Some(f4) = qdot4_for(kind) {
                let mut x4 = Vec::new();
                for _ in 0..4 {
                    x4.extend_from_slice(&xq);
                }
                let r = f4(&row, &x4);
                assert!(
                    r.iter().all(|v| (v - a).abs() <= 1e-3 * a.abs().max(1.0)),
                    "{r:?} vs {a}"
                );
            }
            // Against the dequantised weights in f32: only the 8-bit activation rounding
            // separates the two.
            let mut wd = vec![0.0; w.len()];
            super::super::quant::dequantize_row(kind, &row, &mut wd);
            let exact = dot_f32(&wd, &x);
            assert!(
                (a - exact).abs() < 0.02 * exact.abs().max(1.0),
                "{kind:?}: {a} vs {exact}"
            );
        }
    }
}

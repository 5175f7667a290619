//! Dot-product kernels: portable scalar code plus AVX2 versions picked at run time.

use super::quant::{f16_at, Q8Block, QuantKind, QK};

#[cfg(target_arch = "x86_64")]
mod avx2;

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

/// `y += a * x`, vectorisable.
pub(crate) fn axpy(a: f32, x: &[f32], y: &mut [f32]) {
    for (yi, xi) in y.iter_mut().zip(x) {
        *yi += a * xi;
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
            let exact = dot_f32(&w, &x);
            assert!(
                (a - exact).abs() < 0.1 * exact.abs().max(1.0),
                "{kind:?}: {a} vs {exact}"
            );
        }
    }
}

//! Block-quantised tensor formats (ggml layouts) and activation quantisation.
//!
//! All formats group 32 consecutive values of a row into one block:
//! - `Q4_0`: f16 scale `d`, 16 bytes of nibbles; value = `d * (q - 8)`.
//! - `Q4_1`: f16 scale `d`, f16 min `m`, 16 bytes of nibbles; value = `d * q + m`.
//! - `Q8_0`: f16 scale `d`, 32 signed bytes; value = `d * q`.
//!
//! Nibble order: byte `j` holds value `j` in its low nibble and value `j + 16` in its
//! high nibble.

use half::f16;

/// Values per quantisation block.
pub const QK: usize = 32;

/// A quantised weight format.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum QuantKind {
    /// 4-bit, symmetric.
    Q4_0,
    /// 4-bit with a per-block minimum.
    Q4_1,
    /// 8-bit, symmetric.
    Q8_0,
}

impl QuantKind {
    /// Bytes of one 32-value block.
    pub const fn block_bytes(self) -> usize {
        match self {
            QuantKind::Q4_0 => 18,
            QuantKind::Q4_1 => 20,
            QuantKind::Q8_0 => 34,
        }
    }
    /// Bytes of one row of `cols` values (`cols` a multiple of 32).
    pub const fn row_bytes(self, cols: usize) -> usize {
        cols / QK * self.block_bytes()
    }
}

pub(crate) fn f16_at(b: &[u8], at: usize) -> f32 {
    f16::from_le_bytes([b[at], b[at + 1]]).to_f32()
}

/// Dequantises one row (`row.len() == kind.row_bytes(out.len())`) into `out`.
pub fn dequantize_row(kind: QuantKind, row: &[u8], out: &mut [f32]) {
    let bb = kind.block_bytes();
    for (blk, o) in row.chunks_exact(bb).zip(out.chunks_exact_mut(QK)) {
        match kind {
            QuantKind::Q4_0 => {
                let d = f16_at(blk, 0);
                for j in 0..16 {
                    let q = blk[2 + j];
                    o[j] = d * ((q & 0x0f) as f32 - 8.0);
                    o[j + 16] = d * ((q >> 4) as f32 - 8.0);
                }
            }
            QuantKind::Q4_1 => {
                let d = f16_at(blk, 0);
                let m = f16_at(blk, 2);
                for j in 0..16 {
                    let q = blk[4 + j];
                    o[j] = d * (q & 0x0f) as f32 + m;
                    o[j + 16] = d * (q >> 4) as f32 + m;
                }
            }
            QuantKind::Q8_0 => {
                let d = f16_at(blk, 0);
                for j in 0..QK {
                    o[j] = d * (blk[2 + j] as i8) as f32;
                }
            }
        }
    }
}

/// Quantises one row of `x` (length a multiple of 32) into `kind` (used for dummy weights
/// and tests; mirrors ggml's reference quantisers).
pub fn quantize_row(kind: QuantKind, x: &[f32], out: &mut Vec<u8>) {
    for blk in x.chunks_exact(QK) {
        match kind {
            QuantKind::Q4_0 => {
                let (mut amax, mut max) = (0.0f32, 0.0f32);
                for &v in blk {
                    if v.abs() > amax {
                        amax = v.abs();
                        max = v;
                    }
                }
                let d = max / -8.0;
                let id = if d != 0.0 { 1.0 / d } else { 0.0 };
                out.extend_from_slice(&f16::from_f32(d).to_le_bytes());
                for j in 0..16 {
                    let a = ((blk[j] * id + 8.5) as u8).min(15);
                    let b = ((blk[j + 16] * id + 8.5) as u8).min(15);
                    out.push(a | (b << 4));
                }
            }
            QuantKind::Q4_1 => {
                let min = blk.iter().copied().fold(f32::INFINITY, f32::min);
                let max = blk.iter().copied().fold(f32::NEG_INFINITY, f32::max);
                let d = (max - min) / 15.0;
                let id = if d != 0.0 { 1.0 / d } else { 0.0 };
                out.extend_from_slice(&f16::from_f32(d).to_le_bytes());
                out.extend_from_slice(&f16::from_f32(min).to_le_bytes());
                for j in 0..16 {
                    let a = (((blk[j] - min) * id + 0.5) as u8).min(15);
                    let b = (((blk[j + 16] - min) * id + 0.5) as u8).min(15);
                    out.push(a | (b << 4));
                }
            }
            QuantKind::Q8_0 => {
                let amax = blk.iter().fold(0.0f32, |a, v| a.max(v.abs()));
                let d = amax / 127.0;
                let id = if d != 0.0 { 1.0 / d } else { 0.0 };
                out.extend_from_slice(&f16::from_f32(d).to_le_bytes());
                out.extend(blk.iter().map(|&v| (v * id).round() as i8 as u8));
            }
        }
    }
}

/// One activation block quantised to 8 bits (ggml `Q8_1`: scale and scaled sum).
#[derive(Clone, Copy, Debug)]
pub struct Q8Block {
    /// Scale.
    pub d: f32,
    /// `d * sum(qs)`, used by formats with a minimum (`Q4_1`).
    pub s: f32,
    /// Quantised values.
    pub qs: [i8; QK],
}

/// Quantises an activation row into 8-bit blocks exactly as ggml's x86 `quantize_row_q8_1`
/// (and `q8_0`) do before integer dot products: `id = 127 / amax`, round half to even,
/// `d` and `d * sum(qs)` stored as f16. Matching this bit for bit matters: the model
/// amplifies a single flipped rounding into visible logit differences.
pub fn quantize_activation(x: &[f32], out: &mut Vec<Q8Block>) {
    out.clear();
    out.extend(x.chunks_exact(QK).map(quantize_block));
}

/// One block of [`quantize_activation`] (the portable version; the engine uses the SIMD
/// one in `kernels` when the CPU has it, with the same bits).
pub(crate) fn quantize_block(blk: &[f32]) -> Q8Block {
    let amax = blk.iter().fold(0.0f32, |a, v| a.max(v.abs()));
    let d = amax / 127.0;
    let id = if amax != 0.0 { 127.0 / amax } else { 0.0 };
    let mut qs = [0i8; QK];
    let mut sum = 0i32;
    for (q, &v) in qs.iter_mut().zip(blk) {
        *q = (v * id).round_ties_even() as i8;
        sum += *q as i32;
    }
    let d16 = f16::from_f32(d).to_f32();
    let s16 = f16::from_f32(d * sum as f32).to_f32();
    Q8Block { d: d16, s: s16, qs }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantize_dequantize_roundtrip_is_close() {
        let x: Vec<f32> = (0..64)
            .map(|i| ((i * 37 % 11) as f32 - 5.0) * 0.1)
            .collect();
        for kind in [QuantKind::Q4_0, QuantKind::Q4_1, QuantKind::Q8_0] {
            let mut q = Vec::new();
            quantize_row(kind, &x, &mut q);
            assert_eq!(q.len(), kind.row_bytes(64));
            let mut y = vec![0.0; 64];
            dequantize_row(kind, &q, &mut y);
            let tol = if kind == QuantKind::Q8_0 { 0.01 } else { 0.1 };
            for (a, b) in x.iter().zip(&y) {
                assert!((a - b).abs() < tol, "{kind:?}: {a} vs {b}");
            }
        }
    }
}

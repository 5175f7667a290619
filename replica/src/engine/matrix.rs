//! Weight matrices (row-major, `rows x cols`) kept in their storage format, and the
//! batched matrix-vector products the forward pass needs.

use super::kernels::{dot_f32, qdot4_for, qdot_for};
use super::quant::{dequantize_row, quantize_activation, Q8Block, QuantKind, QK};
use memmap2::Mmap;
use rayon::prelude::*;
use std::sync::Arc;

/// Raw bytes of a quantised tensor: owned, or a slice of a memory-mapped file.
#[derive(Clone, Debug)]
pub enum Bytes {
    /// Heap-owned.
    Owned(Vec<u8>),
    /// `len` bytes at `offset` of a mapped file.
    Mapped {
        /// The mapping.
        map: Arc<Mmap>,
        /// Start of the tensor data.
        offset: usize,
        /// Length in bytes.
        len: usize,
    },
}

impl Bytes {
    /// The bytes.
    pub fn as_slice(&self) -> &[u8] {
        match self {
            Bytes::Owned(v) => v,
            Bytes::Mapped { map, offset, len } => &map[*offset..*offset + *len],
        }
    }
}

/// A 2-D weight, `rows` outputs by `cols` inputs.
#[derive(Clone, Debug)]
pub enum Matrix {
    /// Dense f32.
    F32 {
        /// Row-major values.
        w: Vec<f32>,
        /// Output features.
        rows: usize,
        /// Input features.
        cols: usize,
    },
    /// Block-quantised (cols a multiple of 32).
    Quant {
        /// Format.
        kind: QuantKind,
        /// Row-major blocks.
        bytes: Bytes,
        /// Output features.
        rows: usize,
        /// Input features.
        cols: usize,
    },
}

/// Output rows computed per parallel task.
const ROW_CHUNK: usize = 16;
/// Inputs processed together against a chunk of rows.
const TOKEN_TILE: usize = 64;

impl Matrix {
    /// Output features.
    pub fn rows(&self) -> usize {
        match self {
            Matrix::F32 { rows, .. } | Matrix::Quant { rows, .. } => *rows,
        }
    }
    /// Input features.
    pub fn cols(&self) -> usize {
        match self {
            Matrix::F32 { cols, .. } | Matrix::Quant { cols, .. } => *cols,
        }
    }

    /// Copies row `r` as f32 into `out` (embedding lookup).
    pub fn row_f32(&self, r: usize, out: &mut [f32]) {
        match self {
            Matrix::F32 { w, cols, .. } => out.copy_from_slice(&w[r * cols..(r + 1) * cols]),
            Matrix::Quant {
                kind, bytes, cols, ..
            } => {
                let rb = kind.row_bytes(*cols);
                dequantize_row(*kind, &bytes.as_slice()[r * rb..(r + 1) * rb], out);
            }
        }
    }

    /// `out[t] = W x[t]` for `n` inputs stored back to back in `x` (`n * cols`), writing
    /// `n * rows` values. Parallel over output rows; each weight row is read once and
    /// reused for every input.
    pub fn matmul(&self, x: &[f32], n: usize, out: &mut [f32]) {
        let (rows, cols) = (self.rows(), self.cols());
        debug_assert_eq!(x.len(), n * cols);
        debug_assert_eq!(out.len(), n * rows);
        if n == 1 {
            // Decode: write straight into `out`.
            self.matvec(x, out);
            return;
        }
        // Row-major result per chunk of rows, transposed afterwards.
        let mut tmp = vec![0.0f32; rows * n];
        match self {
            Matrix::Quant { kind, cols, .. } => {
                let xq = quantize_inputs(x, n, *cols);
                let dot = qdot_for(*kind);
                let dot4 = qdot4_for(*kind);
                let rb = kind.row_bytes(*cols);
                let bytes = self.quant_bytes();
                let nb = cols / QK;
                tmp.par_chunks_mut(ROW_CHUNK * n)
                    .enumerate()
                    .for_each(|(c, chunk)| {
                        // Token tiles keep the quantised activations in cache while
                        // every row of the chunk passes over them.
                        for t0 in (0..n).step_by(TOKEN_TILE) {
                            let t1 = (t0 + TOKEN_TILE).min(n);
                            for (i, orow) in chunk.chunks_mut(n).enumerate() {
                                let r = c * ROW_CHUNK + i;
                                let wrow = &bytes[r * rb..(r + 1) * rb];
                                let mut t = t0;
                                if let Some(dot4) = dot4 {
                                    while t + 4 <= t1 {
                                        let r4 = dot4(wrow, &xq[t * nb..(t + 4) * nb]);
                                        orow[t..t + 4].copy_from_slice(&r4);
                                        t += 4;
                                    }
                                }
                                for t in t..t1 {
                                    orow[t] = dot(wrow, &xq[t * nb..(t + 1) * nb]);
                                }
                            }
                        }
                    });
            }
            Matrix::F32 { w, .. } => {
                tmp.par_chunks_mut(ROW_CHUNK * n)
                    .enumerate()
                    .for_each(|(c, chunk)| {
                        for (i, orow) in chunk.chunks_mut(n).enumerate() {
                            let r = c * ROW_CHUNK + i;
                            let wrow = &w[r * cols..(r + 1) * cols];
                            for (t, o) in orow.iter_mut().enumerate() {
                                *o = dot_f32(wrow, &x[t * cols..(t + 1) * cols]);
                            }
                        }
                    });
            }
        }
        for r in 0..rows {
            for t in 0..n {
                out[t * rows + r] = tmp[r * n + t];
            }
        }
    }

    /// Single-input product into `out` (`rows` values).
    fn matvec(&self, x: &[f32], out: &mut [f32]) {
        match self {
            Matrix::Quant { kind, cols, .. } => {
                let mut xq = Vec::with_capacity(cols / QK);
                quantize_activation(x, &mut xq);
                let dot = qdot_for(*kind);
                let rb = kind.row_bytes(*cols);
                let bytes = self.quant_bytes();
                out.par_chunks_mut(ROW_CHUNK * 4)
                    .enumerate()
                    .for_each(|(c, chunk)| {
                        let r0 = c * ROW_CHUNK * 4;
                        for (i, o) in chunk.iter_mut().enumerate() {
                            let r = r0 + i;
                            *o = dot(&bytes[r * rb..(r + 1) * rb], &xq);
                        }
                    });
            }
            Matrix::F32 { w, cols, .. } => {
                out.par_chunks_mut(ROW_CHUNK * 4)
                    .enumerate()
                    .for_each(|(c, chunk)| {
                        let r0 = c * ROW_CHUNK * 4;
                        for (i, o) in chunk.iter_mut().enumerate() {
                            let r = r0 + i;
                            *o = dot_f32(&w[r * cols..(r + 1) * cols], x);
                        }
                    });
            }
        }
    }

    fn quant_bytes(&self) -> &[u8] {
        match self {
            Matrix::Quant { bytes, .. } => bytes.as_slice(),
            Matrix::F32 { .. } => &[],
        }
    }
}

fn quantize_inputs(x: &[f32], n: usize, cols: usize) -> Vec<Q8Block> {
    let nb = cols / QK;
    let mut all = Vec::with_capacity(n * nb);
    let mut tmp = Vec::with_capacity(nb);
    for t in 0..n {
        quantize_activation(&x[t * cols..(t + 1) * cols], &mut tmp);
        all.extend_from_slice(&tmp);
    }
    all
}

#[cfg(test)]
mod tests {
    use super::super::quant::quantize_row;
    use super::*;

    #[test]
    fn batched_matmul_equals_single() {
        let (rows, cols, n) = (40, 64, 3);
        let wf: Vec<f32> = (0..rows * cols)
            .map(|i| ((i * 31 % 17) as f32 - 8.0) / 9.0)
            .collect();
        let x: Vec<f32> = (0..n * cols)
            .map(|i| ((i * 13 % 7) as f32 - 3.0) / 4.0)
            .collect();
        let mut q = Vec::new();
        quantize_row(QuantKind::Q4_1, &wf, &mut q);
        for m in [
            Matrix::F32 {
                w: wf.clone(),
                rows,
                cols,
            },
            Matrix::Quant {
                kind: QuantKind::Q4_1,
                bytes: Bytes::Owned(q),
                rows,
                cols,
            },
        ] {
            let mut batched = vec![0.0; n * rows];
            m.matmul(&x, n, &mut batched);
            for t in 0..n {
                let mut one = vec![0.0; rows];
                m.matmul(&x[t * cols..(t + 1) * cols], 1, &mut one);
                assert_eq!(&batched[t * rows..(t + 1) * rows], &one[..]);
                let r = 5;
                let exact = dot_f32(&wf[r * cols..(r + 1) * cols], &x[t * cols..(t + 1) * cols]);
                assert!((one[r] - exact).abs() < 0.2, "{} vs {exact}", one[r]);
            }
        }
    }
}

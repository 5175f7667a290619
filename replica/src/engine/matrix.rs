//! Weight matrices (row-major, `rows x cols`) kept in their storage format, and the
//! batched matrix-vector products the forward pass needs.

use super::kernels::{dot_f32, qdot4_for, qdot_for};
use super::quant::{dequantize_row, quantize_activation, Q8Block, QuantKind, QK};
use memmap2::Mmap;
use rayon::prelude::*;
use std::sync::{Arc, OnceLock};

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

/// Output rows computed per parallel task (decode is parallel over rows in 4x this).
const ROW_CHUNK: usize = 16;
/// Most inputs processed together against the weight rows (prefill is parallel over
/// tiles of inputs).
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
    /// `n * rows` values.
    pub fn matmul(&self, x: &[f32], n: usize, out: &mut [f32]) {
        self.matmul_prepared(&Input::new(x, n), out);
    }

    /// Like [`Matrix::matmul`], reusing `input`'s 8-bit quantisation across the matrices
    /// that read the same activations (q/k/v, gate/up).
    pub fn matmul_prepared(&self, input: &Input<'_>, out: &mut [f32]) {
        let (rows, cols, n) = (self.rows(), self.cols(), input.n);
        debug_assert_eq!(input.x.len(), n * cols);
        debug_assert_eq!(out.len(), n * rows);
        if n == 1 {
            // Decode: parallel over rows, written straight into `out`.
            self.matvec(input, out);
            return;
        }
        // Parallel over token tiles: each task owns a contiguous slice of `out` and reads
        // every weight row once for its tile (the tile's activations stay in cache).
        let tile = n
            .div_ceil(2 * rayon::current_num_threads().max(1))
            .clamp(4, TOKEN_TILE)
            .next_multiple_of(4);
        match self {
            Matrix::Quant { kind, cols, .. } => {
                let xq = input.quantized();
                let dot = qdot_for(*kind);
                let dot4 = qdot4_for(*kind);
                let rb = kind.row_bytes(*cols);
                let bytes = self.quant_bytes();
                let nb = cols / QK;
                out.par_chunks_mut(tile * rows)
                    .enumerate()
                    .for_each(|(c, chunk)| {
                        let t0 = c * tile;
                        let m = chunk.len() / rows;
                        let xs = &xq[t0 * nb..(t0 + m) * nb];
                        for (r, wrow) in bytes.chunks_exact(rb).enumerate() {
                            let mut t = 0;
                            if let Some(dot4) = dot4 {
                                while t + 4 <= m {
                                    let r4 = dot4(wrow, &xs[t * nb..(t + 4) * nb]);
                                    for (j, v) in r4.into_iter().enumerate() {
                                        chunk[(t + j) * rows + r] = v;
                                    }
                                    t += 4;
                                }
                            }
                            for t in t..m {
                                chunk[t * rows + r] = dot(wrow, &xs[t * nb..(t + 1) * nb]);
                            }
                        }
                    });
            }
            Matrix::F32 { w, .. } => {
                let x = input.x;
                out.par_chunks_mut(tile * rows)
                    .enumerate()
                    .for_each(|(c, chunk)| {
                        let t0 = c * tile;
                        for (i, orow) in chunk.chunks_exact_mut(rows).enumerate() {
                            let xt = &x[(t0 + i) * cols..(t0 + i + 1) * cols];
                            for (o, wrow) in orow.iter_mut().zip(w.chunks_exact(cols)) {
                                *o = dot_f32(wrow, xt);
                            }
                        }
                    });
            }
        }
    }

    /// Single-input product into `out` (`rows` values).
    fn matvec(&self, input: &Input<'_>, out: &mut [f32]) {
        match self {
            Matrix::Quant { kind, cols, .. } => {
                let xq = input.quantized();
                let dot = qdot_for(*kind);
                let rb = kind.row_bytes(*cols);
                let bytes = self.quant_bytes();
                out.par_chunks_mut(ROW_CHUNK * 4)
                    .enumerate()
                    .for_each(|(c, chunk)| {
                        let r0 = c * ROW_CHUNK * 4;
                        for (i, o) in chunk.iter_mut().enumerate() {
                            let r = r0 + i;
                            *o = dot(&bytes[r * rb..(r + 1) * rb], xq);
                        }
                    });
            }
            Matrix::F32 { w, cols, .. } => {
                let x = input.x;
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

/// Activations of `n` tokens (`n * cols` floats), quantised to 8 bits on first use.
pub struct Input<'a> {
    x: &'a [f32],
    n: usize,
    q: OnceLock<Vec<Q8Block>>,
}

impl<'a> Input<'a> {
    /// Wraps `n` rows stored back to back in `x`.
    pub fn new(x: &'a [f32], n: usize) -> Self {
        Self {
            x,
            n,
            q: OnceLock::new(),
        }
    }

    /// The rows quantised block by block (`n * cols / 32` blocks), computed once, in
    /// parallel over rows.
    fn quantized(&self) -> &[Q8Block] {
        self.q.get_or_init(|| {
            let cols = self.x.len() / self.n.max(1);
            let nb = cols / QK;
            let mut all = vec![
                Q8Block {
                    d: 0.0,
                    s: 0.0,
                    qs: [0; QK]
                };
                self.n * nb
            ];
            all.par_chunks_mut(nb.max(1))
                .zip(self.x.par_chunks(cols.max(1)))
                .for_each(|(dst, row)| {
                    let mut tmp = Vec::with_capacity(nb);
                    quantize_activation(row, &mut tmp);
                    dst.copy_from_slice(&tmp);
                });
            all
        })
    }
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

//! Weight matrices (row-major, `rows x cols`) kept in their storage format, and the
//! batched matrix-vector products the forward pass needs.

use super::kernels::{
    dot_f32, group_dot_fn, qdot4_for, qdot_for, quantize_rows, GroupDotFn, Packed, QDot4Fn, QDotFn,
    GROUP,
};
use super::quant::{dequantize_row, Q8Block, QuantKind, QK};
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

/// Output rows per parallel task of a single-input product (decode): small enough that
/// a 576-row matrix splits evenly over 2 threads (18 tasks; 64-row tasks gave 9, and one
/// thread waited for the other's fifth).
const DECODE_ROWS: usize = 32;
/// Most inputs processed together against the weight rows (prefill is parallel over
/// tiles of inputs).
const TOKEN_TILE: usize = 64;
/// Up to this many inputs (batched decode), a product is parallel over weight rows and
/// every row meets all inputs while it is in L1: the weights are read once per step.
const BY_ROWS_MAX: usize = 32;

/// Inputs per task of a token-tiled product: about two tasks per thread, a multiple of
/// `align`, at most [`TOKEN_TILE`].
fn token_tile(n: usize, align: usize) -> usize {
    n.div_ceil(2 * rayon::current_num_threads().max(1))
        .clamp(align, TOKEN_TILE.max(align))
        .next_multiple_of(align)
}

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
        match self {
            Matrix::Quant { kind, cols, .. } => {
                let dots = RowDots::new(*kind, self.quant_bytes(), *cols, input);
                if n <= BY_ROWS_MAX {
                    dots.by_rows(n, rows, out);
                } else {
                    dots.by_token_tiles(n, rows, out);
                }
            }
            Matrix::F32 { w, .. } => {
                // Parallel over token tiles: each task owns a contiguous slice of `out`.
                let tile = token_tile(n, 4);
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

    /// `out_i = W_i x` for matrices that read the same activations (q/k/v, gate/up).
    /// With one input, all their rows are split into one set of parallel tasks, so the
    /// threads meet once instead of once per matrix (decode spends its time in these
    /// joins as much as in the small matrices); otherwise each product runs on its own.
    pub fn matmul_prepared_many(input: &Input<'_>, jobs: &mut [(&Matrix, &mut [f32])]) {
        let all_quant = jobs.iter().all(|(m, _)| matches!(m, Matrix::Quant { .. }));
        if input.n != 1 || !all_quant {
            for (m, out) in jobs.iter_mut() {
                m.matmul_prepared(input, out);
            }
            return;
        }
        let xq = input.quantized();
        let mut tasks: Vec<(&Matrix, usize, &mut [f32])> = Vec::new();
        for (m, out) in jobs.iter_mut() {
            debug_assert_eq!(out.len(), m.rows());
            let m: &Matrix = m;
            for (c, chunk) in out.chunks_mut(DECODE_ROWS).enumerate() {
                tasks.push((m, c * DECODE_ROWS, chunk));
            }
        }
        tasks.into_par_iter().for_each(|(m, r0, chunk)| {
            if let Matrix::Quant { kind, cols, .. } = m {
                decode_rows(*kind, m.quant_bytes(), kind.row_bytes(*cols), r0, xq, chunk);
            }
        });
    }

    /// Single-input product into `out` (`rows` values).
    fn matvec(&self, input: &Input<'_>, out: &mut [f32]) {
        match self {
            Matrix::Quant { kind, cols, .. } => {
                let xq = input.quantized();
                let rb = kind.row_bytes(*cols);
                let bytes = self.quant_bytes();
                out.par_chunks_mut(DECODE_ROWS)
                    .enumerate()
                    .for_each(|(c, chunk)| {
                        decode_rows(*kind, bytes, rb, c * DECODE_ROWS, xq, chunk);
                    });
            }
            Matrix::F32 { w, cols, .. } => {
                let x = input.x;
                out.par_chunks_mut(DECODE_ROWS)
                    .enumerate()
                    .for_each(|(c, chunk)| {
                        let r0 = c * DECODE_ROWS;
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

/// `out[i] = row (r0 + i) . xq` for one task of a decode product, one row after the
/// other. (Two rows interleaved block by block, with AVX2 or in the halves of AVX-512
/// registers, gave the same bits but ran 10-35% slower here: decode reads ~100 MB of
/// weights per token, and one sequential stream per thread is what the prefetchers
/// serve best.)
fn decode_rows(
    kind: QuantKind,
    bytes: &[u8],
    rb: usize,
    r0: usize,
    xq: &[Q8Block],
    out: &mut [f32],
) {
    let dot = qdot_for(kind);
    for (i, o) in out.iter_mut().enumerate() {
        let r = r0 + i;
        *o = dot(&bytes[r * rb..(r + 1) * rb], xq);
    }
}

/// Activations of `n` tokens (`n * cols` floats), quantised to 8 bits on first use.
pub struct Input<'a> {
    x: &'a [f32],
    n: usize,
    q: OnceLock<Vec<Q8Block>>,
    packed: OnceLock<Packed>,
}

impl<'a> Input<'a> {
    /// Wraps `n` rows stored back to back in `x`.
    pub fn new(x: &'a [f32], n: usize) -> Self {
        Self {
            x,
            n,
            q: OnceLock::new(),
            packed: OnceLock::new(),
        }
    }

    /// The rows quantised block by block (`n * cols / 32` blocks), computed once (in
    /// parallel over rows when there are many).
    fn quantized(&self) -> &[Q8Block] {
        self.q.get_or_init(|| {
            let cols = self.x.len() / self.n.max(1);
            let nb = cols / QK;
            let zero = Q8Block {
                d: 0.0,
                s: 0.0,
                qs: [0; QK],
            };
            let mut all = vec![zero; self.n * nb];
            if self.x.len() < PAR_QUANTIZE_MIN {
                quantize_rows(self.x, &mut all);
            } else {
                all.par_chunks_mut(nb.max(1))
                    .zip(self.x.par_chunks(cols.max(1)))
                    .for_each(|(dst, row)| quantize_rows(row, dst));
            }
            all
        })
    }

    /// The quantised rows laid out for the multi-token kernels, computed once.
    fn packed(&self) -> &Packed {
        self.packed.get_or_init(|| {
            let nb = self.x.len() / self.n.max(1) / QK;
            Packed::new(self.quantized(), self.n, nb)
        })
    }
}

/// Below this many activation values, quantising in parallel costs more than it saves.
const PAR_QUANTIZE_MIN: usize = 1 << 16;

/// One quantised weight matrix against the quantised inputs of a product.
struct RowDots<'a> {
    kind: QuantKind,
    bytes: &'a [u8],
    /// Bytes per weight row.
    rb: usize,
    /// Blocks per row.
    nb: usize,
    how: How<'a>,
}

/// Which kernels compute a row against several inputs.
enum How<'a> {
    /// AVX-512: up to 16 inputs per pass over the row.
    Groups(&'a Packed, GroupDotFn),
    /// One input at a time, or four (`dot4`) where a kernel exists.
    Blocks {
        xq: &'a [Q8Block],
        dot: QDotFn,
        dot4: Option<QDot4Fn>,
    },
}

impl<'a> RowDots<'a> {
    fn new(kind: QuantKind, bytes: &'a [u8], cols: usize, input: &'a Input<'_>) -> Self {
        let how = match group_dot_fn() {
            Some(f) => How::Groups(input.packed(), f),
            None => How::Blocks {
                xq: input.quantized(),
                dot: qdot_for(kind),
                dot4: qdot4_for(kind),
            },
        };
        Self {
            kind,
            bytes,
            rb: kind.row_bytes(cols),
            nb: cols / QK,
            how,
        }
    }

    /// Inputs a token tile must be a multiple of (so tiles never split a group).
    fn align(&self) -> usize {
        match self.how {
            How::Groups(..) => GROUP,
            How::Blocks { .. } => 4,
        }
    }

    /// `put(t, row r . x[t])` for the inputs `t0..t1` (`t0` a multiple of `align()`).
    #[inline]
    fn row(&self, r: usize, t0: usize, t1: usize, mut put: impl FnMut(usize, f32)) {
        let wrow = &self.bytes[r * self.rb..(r + 1) * self.rb];
        match &self.how {
            How::Groups(packed, f) => {
                let mut buf = [0.0f32; GROUP];
                for (gi, g) in packed.groups[t0 / GROUP..t1.div_ceil(GROUP)]
                    .iter()
                    .enumerate()
                {
                    f(self.kind, wrow, g, &mut buf);
                    let base = t0 + gi * GROUP;
                    for (j, &v) in buf[..g.len].iter().enumerate() {
                        put(base + j, v);
                    }
                }
            }
            How::Blocks { xq, dot, dot4 } => {
                let nb = self.nb;
                let mut t = t0;
                if let Some(dot4) = dot4 {
                    while t + 4 <= t1 {
                        let r4 = dot4(wrow, &xq[t * nb..(t + 4) * nb]);
                        for (j, v) in r4.into_iter().enumerate() {
                            put(t + j, v);
                        }
                        t += 4;
                    }
                }
                for t in t..t1 {
                    put(t, dot(wrow, &xq[t * nb..(t + 1) * nb]));
                }
            }
        }
    }

    /// Few inputs: tasks own runs of weight rows, each row meeting every input.
    fn by_rows(&self, n: usize, rows: usize, out: &mut [f32]) {
        let threads = rayon::current_num_threads().max(1);
        let chunk = rows.div_ceil(4 * threads).clamp(16, 1024);
        // Task c writes rows `c * chunk..` of every input's output row.
        let mut per_input: Vec<_> = out.chunks_mut(rows).map(|o| o.chunks_mut(chunk)).collect();
        let tasks: Vec<Vec<&mut [f32]>> = (0..rows.div_ceil(chunk))
            .map(|_| per_input.iter_mut().filter_map(Iterator::next).collect())
            .collect();
        tasks.into_par_iter().enumerate().for_each(|(c, mut outs)| {
            let r0 = c * chunk;
            for i in 0..outs[0].len() {
                self.row(r0 + i, 0, n, |t, v| outs[t][i] = v);
            }
        });
    }

    /// Many inputs: tasks own tiles of inputs (a contiguous slice of `out`) and read every
    /// weight row once per tile, while the tile's activations stay in cache.
    fn by_token_tiles(&self, n: usize, rows: usize, out: &mut [f32]) {
        let tile = token_tile(n, self.align());
        out.par_chunks_mut(tile * rows)
            .enumerate()
            .for_each(|(c, chunk)| {
                let t0 = c * tile;
                let m = chunk.len() / rows;
                for r in 0..rows {
                    self.row(r, t0, t0 + m, |t, v| chunk[(t - t0) * rows + r] = v);
                }
            });
    }
}

#[cfg(test)]
mod tests {
    use super::super::quant::quantize_row;
    use super::*;

    /// Every path of a batched product (few inputs by rows, many by token tiles) gives
    /// each input the bits of the single-input product, for every format.
    #[test]
    fn quantised_batches_have_single_input_bits() {
        let (rows, cols) = (70, 96);
        let wf: Vec<f32> = (0..rows * cols)
            .map(|i| ((i * 7919 % 211) as f32 - 105.0) / 70.0)
            .collect();
        for kind in [QuantKind::Q4_0, QuantKind::Q4_1, QuantKind::Q8_0] {
            let mut q = Vec::new();
            quantize_row(kind, &wf, &mut q);
            let m = Matrix::Quant {
                kind,
                bytes: Bytes::Owned(q),
                rows,
                cols,
            };
            for n in [2, 5, 16, 31, 33, 70] {
                let x: Vec<f32> = (0..n * cols)
                    .map(|i| ((i * 104_729 % 173) as f32 - 86.0) / 50.0)
                    .collect();
                let mut batched = vec![0.0; n * rows];
                m.matmul(&x, n, &mut batched);
                for t in 0..n {
                    let mut one = vec![0.0; rows];
                    m.matmul(&x[t * cols..(t + 1) * cols], 1, &mut one);
                    let row = &batched[t * rows..(t + 1) * rows];
                    assert!(
                        row.iter()
                            .zip(&one)
                            .all(|(a, b)| a.to_bits() == b.to_bits()),
                        "{kind:?} n={n} t={t}"
                    );
                }
            }
        }
    }

    /// Products fused into one parallel region give each matrix the bits it gets alone.
    #[test]
    fn fused_products_have_single_product_bits() {
        let cols = 64;
        let mats: Vec<Matrix> = [
            (70, QuantKind::Q4_1),
            (24, QuantKind::Q8_0),
            (130, QuantKind::Q4_0),
        ]
        .into_iter()
        .map(|(rows, kind)| {
            let wf: Vec<f32> = (0..rows * cols)
                .map(|i| ((i * 7919 % 211) as f32 - 105.0) / 70.0)
                .collect();
            let mut q = Vec::new();
            quantize_row(kind, &wf, &mut q);
            Matrix::Quant {
                kind,
                bytes: Bytes::Owned(q),
                rows,
                cols,
            }
        })
        .collect();
        for n in [1, 3] {
            let x: Vec<f32> = (0..n * cols)
                .map(|i| ((i * 104_729 % 173) as f32 - 86.0) / 50.0)
                .collect();
            let input = Input::new(&x, n);
            let mut outs: Vec<Vec<f32>> = mats.iter().map(|m| vec![0.0; n * m.rows()]).collect();
            let mut jobs: Vec<(&Matrix, &mut [f32])> = mats
                .iter()
                .zip(outs.iter_mut())
                .map(|(m, o)| (m, &mut o[..]))
                .collect();
            Matrix::matmul_prepared_many(&input, &mut jobs);
            for (m, got) in mats.iter().zip(&outs) {
                let mut want = vec![0.0; n * m.rows()];
                m.matmul(&x, n, &mut want);
                let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
                assert_eq!(bits(got), bits(&want), "n={n} rows={}", m.rows());
            }
        }
    }

    /// A decode task gives each row the single-row kernel's bits, from any first row.
    #[test]
    fn decode_rows_have_single_row_bits() {
        let (rows, cols) = (23, 576);
        let wf: Vec<f32> = (0..rows * cols)
            .map(|i| ((i * 7919 % 211) as f32 - 105.0) / 70.0 * (1.0 + (i / cols) as f32 * 0.1))
            .collect();
        let x: Vec<f32> = (0..cols)
            .map(|i| ((i * 104_729 % 173) as f32 - 86.0) / 50.0)
            .collect();
        let input = Input::new(&x, 1);
        for kind in [QuantKind::Q4_0, QuantKind::Q4_1, QuantKind::Q8_0] {
            let mut q = Vec::new();
            quantize_row(kind, &wf, &mut q);
            let rb = kind.row_bytes(cols);
            let one = qdot_for(kind);
            let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
            let want: Vec<f32> = (0..rows)
                .map(|r| one(&q[r * rb..(r + 1) * rb], input.quantized()))
                .collect();
            let mut got = vec![0.0f32; rows - 3];
            decode_rows(kind, &q, rb, 3, input.quantized(), &mut got);
            assert_eq!(bits(&got), bits(&want[3..]), "{kind:?}");
        }
    }

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

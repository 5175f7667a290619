//! The projections through cuBLAS: f16 weights and activations, f32 output and accumulate.
#![allow(unsafe_code)] // cuBLAS FFI; each block states its invariants.

use super::err::DevErr;
use super::weights::DevMatrix;
use crate::error::EngineError;
use cudarc::cublas::{result::gemm_ex, sys, CudaBlas};
use cudarc::driver::{CudaSlice, CudaStream, DevicePtr, DevicePtrMut};
use std::ffi::c_int;

/// The column-major GEMM shape that computes row-major `y[t x rows] = x[t x cols] W^T`.
///
/// cuBLAS sees row-major `W` (`rows x cols`) as column-major `cols x rows`, so it is
/// transposed (`op(A) = W`, `m = rows`, `k = cols`, `lda = cols`); row-major `x` is
/// column-major `cols x t` (`n = t`, `ldb = cols`) and column-major `y` (`rows x t`,
/// `ldc = rows`) is the row-major `t x rows` result.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct GemmShape {
    pub(crate) m: c_int,
    pub(crate) n: c_int,
    pub(crate) k: c_int,
    pub(crate) lda: c_int,
    pub(crate) ldb: c_int,
    pub(crate) ldc: c_int,
}

impl GemmShape {
    /// The shape for a `rows x cols` weight applied to `t` inputs.
    pub(crate) fn linear(rows: usize, cols: usize, t: usize) -> Result<Self, EngineError> {
        let int = |v: usize| {
            c_int::try_from(v).map_err(|_| EngineError::Device(format!("GEMM size {v} too large")))
        };
        Ok(Self {
            m: int(rows)?,
            n: int(t)?,
            k: int(cols)?,
            lda: int(cols)?,
            ldb: int(cols)?,
            ldc: int(rows)?,
        })
    }
}

/// `y = x W^T (+ y when accumulate)`: `x` holds `t` f16 rows of `w.cols`, `y` `t` f32 rows
/// of `w.rows`. Accumulating is how the residual adds are done.
pub(crate) fn linear(
    blas: &CudaBlas,
    stream: &CudaStream,
    w: &DevMatrix,
    x: &CudaSlice<u16>,
    t: usize,
    y: &mut CudaSlice<f32>,
    accumulate: bool,
) -> Result<(), EngineError> {
    let s = GemmShape::linear(w.rows, w.cols, t)?;
    if x.len() < t * w.cols || y.len() < t * w.rows {
        return Err(EngineError::Device(format!(
            "GEMM buffers too small for {t} x {}x{}",
            w.rows, w.cols
        )));
    }
    let alpha = 1.0f32;
    let beta = if accumulate { 1.0f32 } else { 0.0 };
    let (a, _ra) = w.data.device_ptr(stream);
    let (b, _rb) = x.device_ptr(stream);
    let (c, _rc) = y.device_ptr_mut(stream);
    // SAFETY: a, b and c are live device allocations of this context, sized for the shape
    // (checked above; w.data holds rows * cols values); alpha and beta are host f32 values
    // as the handle's default host pointer mode and the 32F compute type require.
    unsafe {
        gemm_ex(
            *blas.handle(),
            sys::cublasOperation_t::CUBLAS_OP_T,
            sys::cublasOperation_t::CUBLAS_OP_N,
            s.m,
            s.n,
            s.k,
            (&alpha) as *const f32 as *const _,
            a as *const _,
            sys::cudaDataType_t::CUDA_R_16F,
            s.lda,
            b as *const _,
            sys::cudaDataType_t::CUDA_R_16F,
            s.ldb,
            (&beta) as *const f32 as *const _,
            c as *mut _,
            sys::cudaDataType_t::CUDA_R_32F,
            s.ldc,
            sys::cublasComputeType_t::CUBLAS_COMPUTE_32F,
            sys::cublasGemmAlgo_t::CUBLAS_GEMM_DEFAULT,
        )
    }
    .dev("cuBLAS GEMM")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Column-major reference of what cuBLAS computes for a shape with op(A) = A^T.
    fn reference(s: GemmShape, a: &[f32], b: &[f32]) -> Vec<f32> {
        let (m, n, k) = (s.m as usize, s.n as usize, s.k as usize);
        let mut c = vec![0.0; s.ldc as usize * n];
        for j in 0..n {
            for i in 0..m {
                // op(A)[i][l] = A[l][i] = a[l + i * lda]; B[l][j] = b[l + j * ldb].
                c[i + j * s.ldc as usize] = (0..k)
                    .map(|l| a[l + i * s.lda as usize] * b[l + j * s.ldb as usize])
                    .sum();
            }
        }
        c
    }

    #[test]
    fn cuda_gemm_shape_computes_row_major_linear() {
        let (rows, cols, t) = (3, 4, 2);
        let w: Vec<f32> = (0..rows * cols).map(|i| i as f32).collect();
        let x: Vec<f32> = (0..t * cols).map(|i| 1.0 + i as f32 * 0.5).collect();
        let s = GemmShape::linear(rows, cols, t).unwrap();
        let y = reference(s, &w, &x);
        for ti in 0..t {
            for r in 0..rows {
                let want: f32 = (0..cols).map(|c| w[r * cols + c] * x[ti * cols + c]).sum();
                assert_eq!(y[ti * rows + r], want, "t {ti} row {r}");
            }
        }
        assert!(GemmShape::linear(usize::MAX, 1, 1).is_err());
    }
}

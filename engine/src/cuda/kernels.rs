//! The CUDA C source of the backend's kernels, compiled at load time by NVRTC, and their
//! launch configurations (computed on the host, so they are unit-tested without a GPU).
//!
//! The source includes no header: f16 values travel as `unsigned short` and are converted
//! with PTX `cvt` instructions, so NVRTC needs no include path.

use cudarc::driver::LaunchConfig;

/// Kernel entry points, in the order [`super::CudaBackend`] loads them.
pub(crate) const KERNEL_NAMES: [&str; 7] = [
    "embed",
    "rmsnorm",
    "rmsnorm_rows",
    "rope",
    "kv_write",
    "attention",
    "swiglu",
];

/// Largest head dimension the attention kernel's shared query buffer holds.
pub(crate) const MAX_HEAD_DIM: usize = 256;
/// Threads per block of the element-wise kernels.
pub(crate) const ELEMWISE_THREADS: u32 = 256;
/// Threads per block of the row-wise RMSNorm.
pub(crate) const NORM_THREADS: u32 = 256;

/// CUDA C source of every kernel (public so a test can compile it for the host).
pub const KERNEL_SOURCE: &str = r#"
#define ATT_TILE 64
#define MAX_HEAD_DIM 256
#define NEG_INF __int_as_float(0xff800000)

// The host emulation test (replica/tests/cuda_kernels_host.rs) supplies these itself.
#ifndef WARMPATH_HOST_EMULATION
typedef unsigned short half_t;

__device__ __forceinline__ float h2f(half_t h) {
    float f;
    asm("{ cvt.f32.f16 %0, %1; }" : "=f"(f) : "h"(h));
    return f;
}

__device__ __forceinline__ half_t f2h(float f) {
    half_t h;
    asm("{ cvt.rn.f16.f32 %0, %1; }" : "=h"(h) : "f"(f));
    return h;
}
#endif

// Sum of v over the block (blockDim.x a multiple of 32, at most 1024). Called once per kernel.
__device__ float block_sum(float v) {
    __shared__ float part[32];
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    if (lane == 0) part[warp] = v;
    __syncthreads();
    float t = lane < (int)(blockDim.x >> 5) ? part[lane] : 0.0f;
    for (int o = 16; o > 0; o >>= 1) t += __shfl_xor_sync(0xffffffffu, t, o);
    return t;
}

// x[r, :] = table[tokens[r], :] as f32, for n = rows * dim elements.
extern "C" __global__ void embed(const half_t* table, const unsigned int* tokens, float* x,
                                 int dim, long long n) {
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    long long r = i / dim;
    long long c = i - r * dim;
    x[i] = h2f(table[(long long)tokens[r] * dim + c]);
}

__device__ void rmsnorm_row(const float* x, const float* w, half_t* out, int dim, float eps) {
    float ss = 0.0f;
    for (int i = threadIdx.x; i < dim; i += blockDim.x) {
        float v = x[i];
        ss += v * v;
    }
    ss = block_sum(ss);
    float scale = 1.0f / sqrtf(ss / (float)dim + eps);
    for (int i = threadIdx.x; i < dim; i += blockDim.x) out[i] = f2h(x[i] * scale * w[i]);
}

// One block per row: out[r] = x[r] / rms(x[r]) * w, as f16.
extern "C" __global__ void rmsnorm(const float* x, const float* w, half_t* out, int dim,
                                   float eps) {
    long long r = blockIdx.x;
    rmsnorm_row(x + r * dim, w, out + r * dim, dim, eps);
}

// One block per selected row: out[i] = norm(x[rows[i]]).
extern "C" __global__ void rmsnorm_rows(const float* x, const int* rows, const float* w,
                                        half_t* out, int dim, float eps) {
    long long i = blockIdx.x;
    rmsnorm_row(x + (long long)rows[i] * dim, w, out + i * dim, dim, eps);
}

// Rotates the first `heads` heads of every row of qkv (query heads then key heads), one
// thread per (row, head, pair). Angles in double precision, as on the CPU.
extern "C" __global__ void rope(float* qkv, const int* pos, int rows, int stride, int heads,
                                int head_dim, float theta, float freq_scale, int interleaved) {
    int half = head_dim / 2;
    long long total = (long long)rows * heads * half;
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= total) return;
    int f = (int)(i % half);
    long long t = i / half;
    int h = (int)(t % heads);
    long long r = t / heads;
    double inv = pow((double)theta, -2.0 * (double)f / (double)head_dim);
    double ang = (double)pos[r] * (double)freq_scale * inv;
    float c = (float)cos(ang);
    float s = (float)sin(ang);
    float* head = qkv + r * stride + (long long)h * head_dim;
    int a = interleaved ? 2 * f : f;
    int b = interleaved ? 2 * f + 1 : f + half;
    float x0 = head[a];
    float x1 = head[b];
    head[a] = x0 * c - x1 * s;
    head[b] = x0 * s + x1 * c;
}

// Copies K and V of every row into the paged pool: dst[r] is the float offset of the row's
// slot in its page (page * page_floats + slot * kv_dim), layer_off that of the layer's K.
extern "C" __global__ void kv_write(const float* qkv, const long long* dst, float* pool,
                                    int rows, int stride, int q_dim, int kv_dim,
                                    long long layer_off, long long v_off) {
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= (long long)rows * kv_dim) return;
    long long r = i / kv_dim;
    int j = (int)(i - r * kv_dim);
    const float* src = qkv + r * stride + q_dim;
    long long base = dst[r] + layer_off;
    pool[base + j] = src[j];
    pool[base + v_off + j] = src[kv_dim + j];
}

// Causal paged attention: one block per (row, query head), grid (rows, heads). Row r
// attends to positions 0..=pos[r] of its item's block table (pt + pt_off[row_item[r]]),
// in tiles of ATT_TILE keys with an online softmax. blockDim.x >= head_dim.
extern "C" __global__ void attention(const float* qkv, const float* pool, const int* pos,
                                     const int* row_item, const int* pt_off, const int* pt,
                                     half_t* out, int stride, int n_heads, int group,
                                     int head_dim, int kv_dim, int block_size,
                                     long long page_floats, long long layer_off, float scale) {
    __shared__ float qs[MAX_HEAD_DIM];
    __shared__ float ps[ATT_TILE];
    long long r = blockIdx.x;
    int h = blockIdx.y;
    int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5, nwarps = blockDim.x >> 5;
    const float* q = qkv + r * stride + (long long)h * head_dim;
    for (int d = tid; d < head_dim; d += blockDim.x) qs[d] = q[d] * scale;
    __syncthreads();
    int n = pos[r] + 1;
    const int* table = pt + pt_off[row_item[r]];
    long long koff = layer_off + (long long)(h / group) * head_dim;
    long long voff = koff + (long long)block_size * kv_dim;
    float m = NEG_INF, l = 0.0f, acc = 0.0f;
    for (int t0 = 0; t0 < n; t0 += ATT_TILE) {
        int tn = min(ATT_TILE, n - t0);
        for (int j = warp; j < tn; j += nwarps) {
            int p = t0 + j;
            const float* key = pool + (long long)table[p / block_size] * page_floats + koff
                + (long long)(p % block_size) * kv_dim;
            float s = 0.0f;
            for (int d = lane; d < head_dim; d += 32) s += qs[d] * key[d];
            for (int o = 16; o > 0; o >>= 1) s += __shfl_xor_sync(0xffffffffu, s, o);
            if (lane == 0) ps[j] = s;
        }
        __syncthreads();
        float tmax = NEG_INF;
        for (int j = 0; j < tn; ++j) tmax = fmaxf(tmax, ps[j]);
        float mnew = fmaxf(m, tmax);
        float corr = expf(m - mnew);
        __syncthreads();
        for (int j = tid; j < tn; j += blockDim.x) ps[j] = expf(ps[j] - mnew);
        __syncthreads();
        float tsum = 0.0f;
        for (int j = 0; j < tn; ++j) tsum += ps[j];
        l = l * corr + tsum;
        if (tid < head_dim) {
            float a = acc * corr;
            for (int j = 0; j < tn; ++j) {
                int p = t0 + j;
                const float* val = pool + (long long)table[p / block_size] * page_floats + voff
                    + (long long)(p % block_size) * kv_dim;
                a += ps[j] * val[tid];
            }
            acc = a;
        }
        m = mnew;
        __syncthreads();
    }
    if (tid < head_dim) out[(r * n_heads + h) * head_dim + tid] = f2h(acc / l);
}

// out[r, c] = silu(gu[r, c]) * gu[r, ffn + c] as f16 (gate and up side by side per row).
extern "C" __global__ void swiglu(const float* gu, half_t* out, int rows, int ffn) {
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= (long long)rows * ffn) return;
    long long r = i / ffn;
    long long c = i - r * ffn;
    float g = gu[r * 2 * ffn + c];
    float u = gu[r * 2 * ffn + ffn + c];
    out[i] = f2h(g / (1.0f + expf(-g)) * u);
}
"#;

/// One thread per element, `ELEMWISE_THREADS` per block.
pub(crate) fn elementwise(n: usize) -> LaunchConfig {
    let blocks = n.div_ceil(ELEMWISE_THREADS as usize).max(1);
    LaunchConfig {
        grid_dim: (grid_x(blocks), 1, 1),
        block_dim: (ELEMWISE_THREADS, 1, 1),
        shared_mem_bytes: 0,
    }
}

/// One block per row (RMSNorm).
pub(crate) fn per_row(rows: usize) -> LaunchConfig {
    LaunchConfig {
        grid_dim: (grid_x(rows.max(1)), 1, 1),
        block_dim: (NORM_THREADS, 1, 1),
        shared_mem_bytes: 0,
    }
}

/// Threads per attention block: a multiple of 32, at least `head_dim` and 128 (four
/// warps score keys in parallel).
pub(crate) fn attention_threads(head_dim: usize) -> u32 {
    (head_dim.max(128).div_ceil(32) * 32).min(1024) as u32
}

/// Grid `(rows, heads)` of attention blocks.
pub(crate) fn attention(rows: usize, heads: usize, head_dim: usize) -> LaunchConfig {
    LaunchConfig {
        grid_dim: (grid_x(rows.max(1)), heads.clamp(1, 65_535) as u32, 1),
        block_dim: (attention_threads(head_dim), 1, 1),
        shared_mem_bytes: 0,
    }
}

/// A grid x dimension; callers bound their sizes far below `2^31 - 1`.
fn grid_x(blocks: usize) -> u32 {
    blocks.min(i32::MAX as usize) as u32
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cuda_elementwise_launch_covers_every_element() {
        for n in [1usize, 255, 256, 257, 576 * 7, 1 << 20] {
            let c = elementwise(n);
            let threads = c.grid_dim.0 as usize * c.block_dim.0 as usize;
            assert!(threads >= n, "{n}: {c:?}");
            assert!(
                threads - n < ELEMWISE_THREADS as usize,
                "{n}: too many blocks"
            );
            assert!(c.block_dim.0.is_multiple_of(32));
        }
        assert_eq!(
            elementwise(0).grid_dim.0,
            1,
            "an empty launch is still valid"
        );
    }

    #[test]
    fn cuda_attention_launch_fits_the_head() {
        for hd in [16usize, 64, 80, 128, 256] {
            let t = attention_threads(hd) as usize;
            assert!(t >= hd && t.is_multiple_of(32), "{hd}: {t}");
            assert!((128..=1024).contains(&t), "{hd}: {t}");
        }
        let c = attention(300, 9, 64);
        assert_eq!(c.grid_dim, (300, 9, 1));
        assert_eq!(per_row(5).grid_dim, (5, 1, 1));
    }

    #[test]
    fn cuda_source_names_every_entry_point_and_matches_constants() {
        for name in KERNEL_NAMES {
            let decl = format!("__global__ void {name}(");
            assert!(KERNEL_SOURCE.contains(&decl), "missing {decl}");
        }
        assert!(KERNEL_SOURCE.contains(&format!("#define MAX_HEAD_DIM {MAX_HEAD_DIM}\n")));
        assert!(
            !KERNEL_SOURCE.contains("#include"),
            "NVRTC gets no include path"
        );
    }
}

//! The CUDA compute backend (feature `cuda`). (owner: cuda)
//!
//! Weights live on the GPU as f16 (dequantised at load), the KV pool is one device buffer
//! of f32 pages with exactly the CPU pool's layout, so the radix cache and scheduler are
//! backend-agnostic. A step uploads the flattened batch ([`plan`]), then per layer runs
//! RMSNorm, one cuBLAS GEMM for Q/K/V, RoPE, the KV write, paged attention, the output
//! GEMM (accumulating into the residual stream), RMSNorm, one GEMM for gate/up, SwiGLU and
//! the down GEMM (accumulating); the final norm and the head run on each item's last row
//! only and the logits are copied back.
//!
//! Libraries are opened at run time (cudarc `dynamic-loading`): [`probe`] checks them
//! first so a machine without a GPU gets [`EngineError::Device`], never a panic.

mod err;
mod gemm;
mod kernels;
mod measure;
mod plan;
mod probe;
mod weights;

pub use kernels::KERNEL_SOURCE;
pub use measure::{copy_bandwidth, device_name};
pub use probe::{nvrtc_available, probe};
pub use weights::{dequantize_all, weight_bytes_per_step};

use super::backend::ComputeBackend;
use super::config::{ModelConfig, RopeStyle};
use super::kv::KvLayout;
use super::weights::ModelWeights;
use crate::error::EngineError;
use crate::step::StepItem;
use cudarc::cublas::CudaBlas;
use cudarc::driver::{CudaContext, CudaFunction, CudaSlice, CudaStream, PushKernelArg};
use cudarc::nvrtc::{compile_ptx_with_opts, CompileOptions, Ptx};
use err::DevErr;
use plan::{KvGeom, StepPlan};
use std::sync::Arc;
use std::time::Instant;
use weights::DevWeights;

/// Compiles the kernel source to PTX with NVRTC (needs libnvrtc, not a GPU).
pub fn compile_kernels() -> Result<Ptx, EngineError> {
    if !nvrtc_available() {
        return Err(probe::unavailable(&["libnvrtc.so.12 (CUDA NVRTC)"]));
    }
    let opts = CompileOptions {
        ftz: Some(false),
        prec_div: Some(true),
        prec_sqrt: Some(true),
        fmad: Some(true),
        name: Some("warmpath_kernels.cu".into()),
        ..Default::default()
    };
    compile_ptx_with_opts(kernels::KERNEL_SOURCE, opts).dev("NVRTC compile")
}

/// The loaded kernel functions.
struct Kernels {
    embed: CudaFunction,
    rmsnorm: CudaFunction,
    rmsnorm_rows: CudaFunction,
    rope: CudaFunction,
    kv_write: CudaFunction,
    attention: CudaFunction,
    swiglu: CudaFunction,
}

impl Kernels {
    fn load(ctx: &Arc<CudaContext>) -> Result<Self, EngineError> {
        let module = ctx.load_module(compile_kernels()?).dev(
            "loading the kernels (a libnvrtc newer than the driver emits PTX it cannot load)",
        )?;
        let f = |name: &str| module.load_function(name).dev(name);
        let [embed, rmsnorm, rmsnorm_rows, rope, kv_write, attention, swiglu] =
            kernels::KERNEL_NAMES;
        Ok(Self {
            embed: f(embed)?,
            rmsnorm: f(rmsnorm)?,
            rmsnorm_rows: f(rmsnorm_rows)?,
            rope: f(rope)?,
            kv_write: f(kv_write)?,
            attention: f(attention)?,
            swiglu: f(swiglu)?,
        })
    }
}

/// The CUDA backend: one GPU, one stream.
pub struct CudaBackend {
    name: String,
    ctx: Arc<CudaContext>,
    stream: Arc<CudaStream>,
    blas: CudaBlas,
    k: Kernels,
    cfg: ModelConfig,
    w: DevWeights,
    kv: CudaSlice<f32>,
    layout: KvLayout,
    num_pages: usize,
}

impl CudaBackend {
    /// Probes GPU `ordinal`, compiles the kernels, uploads `weights` (validated against
    /// `cfg`) as f16 and allocates `num_pages` KV pages of `layout` on the device.
    #[allow(unsafe_code)] // one FFI flag; see the SAFETY comment.
    pub fn new(
        ordinal: usize,
        cfg: &ModelConfig,
        weights: &ModelWeights,
        layout: KvLayout,
        num_pages: usize,
    ) -> Result<Self, EngineError> {
        probe(ordinal)?;
        if cfg.head_dim > kernels::MAX_HEAD_DIM {
            return Err(EngineError::Device(format!(
                "head_dim {} exceeds the attention kernel's {}",
                cfg.head_dim,
                kernels::MAX_HEAD_DIM
            )));
        }
        let ctx = CudaContext::new(ordinal).dev("creating the context")?;
        // SAFETY: all of the backend's work is ordered on the one default stream, so the
        // per-buffer cross-stream events cudarc would create are not needed.
        unsafe { ctx.disable_event_tracking() };
        let stream = ctx.default_stream();
        let blas = CudaBlas::new(stream.clone()).dev("creating the cuBLAS handle")?;
        let k = Kernels::load(&ctx)?;
        let t0 = Instant::now();
        let w = weights::upload_weights(&stream, cfg, weights)?;
        let kv_floats = layout.values_per_page() * num_pages;
        let (free, total) = ctx.mem_get_info().dev("querying memory")?;
        if kv_floats * 4 > free {
            return Err(EngineError::Device(format!(
                "cuda:{ordinal}: KV pool of {} bytes does not fit in {free} free of {total} bytes",
                kv_floats * 4
            )));
        }
        let kv = stream
            .alloc_zeros::<f32>(kv_floats.max(1))
            .dev("allocating the KV pool")?;
        stream.synchronize().dev("uploading")?;
        let name = format!("cuda:{ordinal}");
        tracing::info!(
            device = %name,
            gpu = %ctx.name().unwrap_or_default(),
            weight_bytes = weight_bytes_per_step(cfg),
            kv_bytes = kv_floats * 4,
            upload_ms = t0.elapsed().as_millis() as u64,
            "cuda backend ready"
        );
        Ok(Self {
            name,
            ctx,
            stream,
            blas,
            k,
            cfg: cfg.clone(),
            w,
            kv,
            layout,
            num_pages,
        })
    }

    #[allow(unsafe_code)] // kernel launches; the SAFETY comment below covers each.
    fn forward(&mut self, plan: &StepPlan) -> Result<Vec<Vec<f32>>, EngineError> {
        let Self {
            stream: s,
            blas,
            k,
            cfg,
            w,
            kv,
            layout,
            ..
        } = self;
        let geom = KvGeom::new(layout);
        let t = plan.rows();
        let n_items = plan.last_rows.len();
        let (dim, q_dim, kv_dim, ffn) = (cfg.dim, cfg.q_dim(), cfg.kv_dim(), cfg.ffn_dim);
        let qkv_w = q_dim + 2 * kv_dim;
        let up = |v: &Vec<i32>| s.clone_htod(v).dev("uploading the step");
        let tokens = s.clone_htod(&plan.tokens).dev("uploading the step")?;
        let (pos, row_item, pt_off, pt, last) = (
            up(&plan.pos)?,
            up(&plan.row_item)?,
            up(&plan.pt_off)?,
            up(&plan.pt)?,
            up(&plan.last_rows)?,
        );
        let kv_dst = s.clone_htod(&plan.kv_dst).dev("uploading the step")?;
        let alloc_f = |n: usize| s.alloc_zeros::<f32>(n.max(1)).dev("allocating activations");
        let alloc_h = |n: usize| s.alloc_zeros::<u16>(n.max(1)).dev("allocating activations");
        let (mut x, mut h, mut qkv) = (alloc_f(t * dim)?, alloc_h(t * dim)?, alloc_f(t * qkv_w)?);
        let (mut att, mut gu, mut act) = (
            alloc_h(t * q_dim)?,
            alloc_f(t * 2 * ffn)?,
            alloc_h(t * ffn)?,
        );
        let (ti, dimi, eps) = (t as i32, dim as i32, cfg.rms_eps);
        let n_x = (t * dim) as i64;
        // SAFETY (every launch below): argument types and order match the kernel
        // signatures in `kernels::KERNEL_SOURCE`; every buffer was allocated above or at
        // load with the sizes the kernel indexes (rows t, widths from `cfg`, page offsets
        // from `plan` within the pool), and all work is ordered on the one stream.
        unsafe {
            s.launch_builder(&k.embed)
                .arg(&w.embd.data)
                .arg(&tokens)
                .arg(&mut x)
                .arg(&dimi)
                .arg(&n_x)
                .launch(kernels::elementwise(t * dim))
        }
        .dev("embed")?;
        let (stride, qd, kvd) = (qkv_w as i32, q_dim as i32, kv_dim as i32);
        let rope_heads = (cfg.n_heads + cfg.n_kv_heads) as i32;
        let (hd, nh) = (cfg.head_dim as i32, cfg.n_heads as i32);
        let group = (cfg.n_heads / cfg.n_kv_heads) as i32;
        let interleaved = i32::from(cfg.rope_style == RopeStyle::Interleaved);
        let bs = layout.block_size.get() as i32;
        let scale = 1.0 / (cfg.head_dim as f32).sqrt();
        let ffn_i = ffn as i32;
        for (l, lw) in w.layers.iter().enumerate() {
            let layer_off = geom.layer(l);
            // SAFETY: see above.
            unsafe {
                s.launch_builder(&k.rmsnorm)
                    .arg(&x)
                    .arg(&lw.attn_norm)
                    .arg(&mut h)
                    .arg(&dimi)
                    .arg(&eps)
                    .launch(kernels::per_row(t))
            }
            .dev("rmsnorm")?;
            gemm::linear(blas, s, &lw.wqkv, &h, t, &mut qkv, false)?;
            // SAFETY: see above.
            unsafe {
                s.launch_builder(&k.rope)
                    .arg(&mut qkv)
                    .arg(&pos)
                    .arg(&ti)
                    .arg(&stride)
                    .arg(&rope_heads)
                    .arg(&hd)
                    .arg(&cfg.rope_theta)
                    .arg(&cfg.rope_freq_scale)
                    .arg(&interleaved)
                    .launch(kernels::elementwise(
                        t * (cfg.n_heads + cfg.n_kv_heads) * cfg.head_dim / 2,
                    ))
            }
            .dev("rope")?;
            // SAFETY: see above.
            unsafe {
                s.launch_builder(&k.kv_write)
                    .arg(&qkv)
                    .arg(&kv_dst)
                    .arg(&mut *kv)
                    .arg(&ti)
                    .arg(&stride)
                    .arg(&qd)
                    .arg(&kvd)
                    .arg(&layer_off)
                    .arg(&geom.v_off)
                    .launch(kernels::elementwise(t * kv_dim))
            }
            .dev("kv_write")?;
            // SAFETY: see above.
            unsafe {
                s.launch_builder(&k.attention)
                    .arg(&qkv)
                    .arg(&*kv)
                    .arg(&pos)
                    .arg(&row_item)
                    .arg(&pt_off)
                    .arg(&pt)
                    .arg(&mut att)
                    .arg(&stride)
                    .arg(&nh)
                    .arg(&group)
                    .arg(&hd)
                    .arg(&kvd)
                    .arg(&bs)
                    .arg(&geom.page_floats)
                    .arg(&layer_off)
                    .arg(&scale)
                    .launch(kernels::attention(t, cfg.n_heads, cfg.head_dim))
            }
            .dev("attention")?;
            gemm::linear(blas, s, &lw.wo, &att, t, &mut x, true)?;
            // SAFETY: see above.
            unsafe {
                s.launch_builder(&k.rmsnorm)
                    .arg(&x)
                    .arg(&lw.ffn_norm)
                    .arg(&mut h)
                    .arg(&dimi)
                    .arg(&eps)
                    .launch(kernels::per_row(t))
            }
            .dev("rmsnorm")?;
            gemm::linear(blas, s, &lw.wgu, &h, t, &mut gu, false)?;
            // SAFETY: see above.
            unsafe {
                s.launch_builder(&k.swiglu)
                    .arg(&gu)
                    .arg(&mut act)
                    .arg(&ti)
                    .arg(&ffn_i)
                    .launch(kernels::elementwise(t * ffn))
            }
            .dev("swiglu")?;
            gemm::linear(blas, s, &lw.w_down, &act, t, &mut x, true)?;
        }
        let mut hn = alloc_h(n_items * dim)?;
        // SAFETY: see above; `last` holds n_items row indices below t.
        unsafe {
            s.launch_builder(&k.rmsnorm_rows)
                .arg(&x)
                .arg(&last)
                .arg(&w.output_norm)
                .arg(&mut hn)
                .arg(&dimi)
                .arg(&eps)
                .launch(kernels::per_row(n_items))
        }
        .dev("final rmsnorm")?;
        let head = w.head();
        let mut logits = alloc_f(n_items * head.rows)?;
        gemm::linear(blas, s, head, &hn, n_items, &mut logits, false)?;
        let host = s.clone_dtoh(&logits).dev("copying logits")?;
        Ok(host
            .chunks_exact(head.rows)
            .take(n_items)
            .map(<[f32]>::to_vec)
            .collect())
    }
}

impl ComputeBackend for CudaBackend {
    fn device(&self) -> &str {
        &self.name
    }
    fn kv_layout(&self) -> KvLayout {
        self.layout
    }
    fn num_pages(&self) -> usize {
        self.num_pages
    }
    fn step(&mut self, items: &[StepItem<'_>]) -> Result<Vec<Vec<f32>>, EngineError> {
        self.ctx.bind_to_thread().dev("binding the context")?;
        let plan = StepPlan::new(&self.layout, items)?;
        self.forward(&plan)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Device, Engine, EngineOptions, ModelSource};

    #[test]
    fn cuda_kernels_compile_with_nvrtc_or_probe_says_why() {
        if nvrtc_available() {
            let ptx = compile_kernels().expect("kernel source compiles").to_src();
            eprintln!("NVRTC compiled the kernels: {} bytes of PTX", ptx.len());
            for name in kernels::KERNEL_NAMES {
                assert!(ptx.contains(&format!(".entry {name}(")), "no entry {name}");
            }
        } else {
            let e = compile_kernels().unwrap_err().to_string();
            eprintln!("no libnvrtc here (install nvidia-cuda-nvrtc-cu12 to compile): {e}");
            assert!(
                e.contains("CUDA is not available") && e.contains("libnvrtc"),
                "{e}"
            );
            let e = probe(0).unwrap_err().to_string();
            assert!(e.contains("CUDA is not available"), "{e}");
        }
    }

    /// Without a GPU loading fails with the probe's error; with one, the tiny model's
    /// logits match the CPU's.
    #[test]
    fn cuda_engine_loads_on_a_gpu_or_fails_clearly() {
        let opts = EngineOptions {
            kv_pages: 4,
            threads: 1,
            ..EngineOptions::default()
        };
        let src = ModelSource::Dummy("tiny".into());
        let gpu = Engine::load_on(&src, &opts, Device::Cuda(0));
        if probe(0).is_err() {
            let e = gpu.unwrap_err().to_string();
            assert!(e.contains("--device cpu"), "{e}");
            let e = copy_bandwidth(0, 1024, 1).unwrap_err().to_string();
            assert!(e.contains("--device cpu"), "{e}");
            return;
        }
        let mut gpu = gpu.expect("tiny model loads on cuda:0");
        let mut cpu = Engine::load(&src, &opts).expect("tiny model loads on the cpu");
        let tokens: Vec<warmpath_core::TokenId> = (0..20)
            .map(|i| warmpath_core::TokenId(i * 7 % 300))
            .collect();
        let pages: Vec<crate::PageId> = (0..4).map(crate::PageId).collect();
        let item = [StepItem {
            tokens: &tokens,
            start_pos: 0,
            pages: &pages,
        }];
        let (a, b) = (gpu.step(&item).unwrap(), cpu.step(&item).unwrap());
        let err: f32 = a[0].iter().zip(&b[0]).map(|(x, y)| (x - y) * (x - y)).sum();
        let norm: f32 = b[0].iter().map(|y| y * y).sum();
        assert!(
            (err / norm).sqrt() < 1e-2,
            "relative error {}",
            (err / norm).sqrt()
        );
    }
}

//! Device facts for `replica gpu-check`: the GPU's name and its copy bandwidth.

use super::err::DevErr;
use super::probe;
use crate::error::EngineError;
use cudarc::driver::CudaContext;
use std::time::Instant;

/// The GPU's name, e.g. `NVIDIA H200`.
pub fn device_name(ordinal: usize) -> Result<String, EngineError> {
    probe(ordinal)?;
    let ctx = CudaContext::new(ordinal).dev("creating the context")?;
    ctx.name().dev("reading the device name")
}

/// Device-to-device copy bandwidth in bytes/s (bytes read plus bytes written), best of
/// `reps` copies of a `bytes`-sized buffer: the ceiling a memory-bound step can reach.
pub fn copy_bandwidth(ordinal: usize, bytes: usize, reps: usize) -> Result<f64, EngineError> {
    probe(ordinal)?;
    let ctx = CudaContext::new(ordinal).dev("creating the context")?;
    let s = ctx.default_stream();
    let src = s.alloc_zeros::<u8>(bytes).dev("allocating")?;
    let mut dst = s.alloc_zeros::<u8>(bytes).dev("allocating")?;
    s.memcpy_dtod(&src, &mut dst).dev("warm-up copy")?;
    s.synchronize().dev("warm-up copy")?;
    let mut best = f64::MAX;
    for _ in 0..reps.max(1) {
        let t0 = Instant::now();
        s.memcpy_dtod(&src, &mut dst).dev("copy")?;
        s.synchronize().dev("copy")?;
        best = best.min(t0.elapsed().as_secs_f64());
    }
    Ok(2.0 * bytes as f64 / best)
}

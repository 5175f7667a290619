//! `replica gpu-check`: the CUDA backend against the CPU and against the hardware.
//! (owner: cuda)
//!
//! For each model: (1) CPU vs CUDA logits on a ragged batch (two prompts prefilled
//! together, a chunked continuation next to a decode, then decode steps), relative L2
//! error per item; (2) prefill tokens/s and decode tokens/s at each batch size; (3) decode
//! against the memory-bandwidth floor: weight bytes plus KV bytes read per step over the
//! measured device copy bandwidth. Prints a table last; fails if an error is over the limit.
//! `scripts/gpu-check.sh` wraps it.

//!
//! - [`common`]: the flags and the report's arithmetic (and the `run` of a build without
//!   `cuda`); `imp` (feature `cuda`): the check itself.

pub mod common;
#[cfg(feature = "cuda")]
mod imp;

#[cfg(not(feature = "cuda"))]
pub use common::run;
pub use common::{decode_floor_tok_s, parse_sizes, rel_err, GpuCheckArgs};
#[cfg(feature = "cuda")]
pub use imp::run;

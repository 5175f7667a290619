//! Subcommands other than `serve`. (owner: engine)
//!
//! - [`generate`]: `replica generate --model PATH --prompt TEXT [--chat] --max-tokens N ...`
//! - [`tokenize`]: `replica tokenize --model PATH --text TEXT`
//! - [`bench`]: `replica bench`, prefill and decode throughput.
//! - [`gpu_check`]: `replica gpu-check`, the CUDA backend against the CPU and the hardware.

pub mod bench;
pub mod generate;
pub mod gpu_check;
pub mod tokenize;

use clap::Args;
use warmpath_engine::ModelSource;

/// The `--model` flag shared by every subcommand: a `.gguf` file, a HF directory,
/// `dummy:NAME`, or nothing for the default SmolLM2 (fetched if missing).
#[derive(Args, Clone, Debug)]
pub struct ModelArg {
    /// Model: a GGUF file, a HF checkpoint directory, `dummy:tiny`, `dummy:smollm2-135m`;
    /// with no value, the default SmolLM2-135M-Instruct Q4_1 (fetched if missing).
    #[arg(long, num_args = 0..=1, default_value = "", default_missing_value = "")]
    pub model: String,
    /// Worker threads (0 = all cores).
    #[arg(long, default_value_t = 0)]
    pub threads: usize,
}

impl ModelArg {
    /// The parsed source.
    pub fn source(&self) -> ModelSource {
        match self.model.parse() {
            Ok(s) => s,
            Err(never) => match never {},
        }
    }
}

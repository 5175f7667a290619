//! What both builds of `replica gpu-check` share: its flags ([`GpuCheckArgs`]), the
//! arithmetic of its report, and, without the `cuda` feature, the `run` that says so.

use clap::Args;

/// Arguments of `replica gpu-check`.
#[derive(Args, Debug, Clone)]
pub struct GpuCheckArgs {
    /// Models to check, comma-separated.
    #[arg(long, default_value = "dummy:smollm2-135m,dummy:llama-1b")]
    pub models: String,
    /// GPU to check.
    #[arg(long, default_value = "cuda:0")]
    pub device: String,
    /// Largest accepted relative L2 error of the logits.
    #[arg(long, default_value_t = 1e-2)]
    pub max_rel_err: f64,
    /// Prompt length of the prefill measurement.
    #[arg(long, default_value_t = 512)]
    pub prompt_tokens: usize,
    /// Prompts prefilled together in the prefill measurement.
    #[arg(long, default_value_t = 8)]
    pub prefill_batch: usize,
    /// Context of each sequence before the decode measurement.
    #[arg(long, default_value_t = 256)]
    pub context: usize,
    /// Timed decode steps per batch size.
    #[arg(long, default_value_t = 32)]
    pub decode_steps: usize,
    /// Decode batch sizes, comma-separated.
    #[arg(long, default_value = "1,16,64")]
    pub batches: String,
    /// Compute threads of the CPU reference (0 = all cores).
    #[arg(long, default_value_t = 0)]
    pub threads: usize,
}

/// Runs the check; the returned text ends with the table.
#[cfg(not(feature = "cuda"))]
pub fn run(args: &GpuCheckArgs) -> anyhow::Result<String> {
    let device: warmpath_engine::Device = args.device.parse()?;
    device.check_compiled()?;
    anyhow::bail!("gpu-check: {}", warmpath_engine::backend::NO_CUDA_FEATURE)
}

/// Relative L2 error of `got` against `want`.
pub fn rel_err(got: &[f32], want: &[f32]) -> f64 {
    let (mut diff, mut norm) = (0.0f64, 0.0f64);
    for (g, w) in got.iter().zip(want) {
        diff += (*g as f64 - *w as f64).powi(2);
        norm += (*w as f64).powi(2);
    }
    if norm == 0.0 {
        diff.sqrt()
    } else {
        (diff / norm).sqrt()
    }
}

/// Parses a comma-separated list of positive sizes.
pub fn parse_sizes(s: &str) -> anyhow::Result<Vec<usize>> {
    s.split(',')
        .map(|p| match p.trim().parse::<usize>() {
            Ok(n) if n > 0 => Ok(n),
            _ => Err(anyhow::anyhow!("invalid size {p:?} in {s:?}")),
        })
        .collect()
}

/// Decode tokens/s the memory bandwidth allows: each step reads all weights once and the
/// K/V of every position of every sequence.
pub fn decode_floor_tok_s(
    weight_bytes: u64,
    kv_bytes_per_token: u64,
    batch: usize,
    avg_context: f64,
    bandwidth: f64,
) -> f64 {
    let bytes = weight_bytes as f64 + batch as f64 * avg_context * kv_bytes_per_token as f64;
    batch as f64 / (bytes / bandwidth)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cuda_check_helpers() {
        assert_eq!(rel_err(&[1.0, 2.0], &[1.0, 2.0]), 0.0);
        assert!((rel_err(&[3.0, 4.0], &[0.0, 0.0]) - 5.0).abs() < 1e-12);
        assert!((rel_err(&[1.1, 0.0], &[1.0, 0.0]) - 0.1).abs() < 1e-6);
        assert_eq!(parse_sizes("1, 16,64").unwrap(), vec![1, 16, 64]);
        assert!(parse_sizes("1,0").is_err() && parse_sizes("x").is_err());
        // 1 GB of weights, no KV, 1 TB/s: 1000 steps/s of batch 2.
        let f = decode_floor_tok_s(1_000_000_000, 0, 2, 0.0, 1e12);
        assert!((f - 2000.0).abs() < 1e-6, "{f}");
        // KV doubles the bytes: half the steps.
        let f = decode_floor_tok_s(1_000_000_000, 1000, 2, 500_000.0, 1e12);
        assert!((f - 1000.0).abs() < 1e-6, "{f}");
    }

    #[cfg(not(feature = "cuda"))]
    #[test]
    fn cuda_gpu_check_without_the_feature_says_so() {
        use clap::Parser;
        #[derive(Parser)]
        struct P {
            #[command(flatten)]
            a: GpuCheckArgs,
        }
        let p = P::parse_from(["x"]);
        let e = run(&p.a).unwrap_err().to_string();
        assert!(e.contains("built without the cuda feature"), "{e}");
    }
}

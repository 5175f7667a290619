//! # loadtest
//!
//! Warmpath's load generator and cluster simulator. Two modes share workloads, metrics and
//! the report format:
//!
//! - `loadtest run`: drives any OpenAI-compatible endpoint (open or closed loop), streams
//!   responses to measure TTFT/ITL, reads `usage.prompt_tokens_details.cached_tokens` and the
//!   `x-warmpath-replica` header.
//! - `loadtest simulate`: a discrete-event simulation of N replicas routed by the real
//!   `router-policy` code, fed by the simulated replicas' KV events.
//! - `loadtest calibrate`: measures a replica and writes a cost profile for the simulator.
//!
//! # Layout
//! - [`trace`]: Mooncake / Azure trace parsing with line-numbered errors.
//! - [`workload`]: the four workloads and the arrival processes.
//! - [`prompt`]: deterministic prompt content, text, and block hashes.
//! - [`metrics`]: request records and the vLLM-compatible summary.
//! - [`report`]: terminal table, JSON files, plots.
//! - [`sim`]: the simulator. [`run`]: the HTTP load generator. [`calibrate`]: profiling.

pub mod calibrate;
pub mod cli;
pub mod metrics;
pub mod prompt;
pub mod report;
pub mod rng;
pub mod run;
pub mod sim;
pub mod simulate_cmd;
pub mod trace;
pub mod workload;

/// The rollout conversation key of a prompt, as the simulated gateway computes it
/// (`router_policy::sticky_key` over its first blocks, no tenant salt).
pub fn rollout_key(prompt: &prompt::Prompt, block_size: u32) -> u64 {
    let bs = warmpath_core::BlockSize(block_size);
    let n = router_policy::rollout::STICKY_BLOCKS * block_size as usize;
    router_policy::sticky_key(&sim::rollout::prefix_tokens(prompt, n), bs, None)
}

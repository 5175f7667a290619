//! Workloads shared by `run` and `simulate`: each builds a list of [`RequestSpec`]s (prompt
//! content, output length, arrival time) deterministically from a seed.

pub mod agent_loop;
mod args;
mod arrivals;
mod azure;
pub mod mixed;
mod mooncake;
mod multi_turn;
mod shared_prefix;
mod spec;

pub use args::{WorkloadArgs, WorkloadKind};
pub use arrivals::{assign_arrivals, LoadShape};
pub use spec::{RequestSpec, WorkloadError};

use std::path::PathBuf;

/// A built workload.
#[derive(Clone, Debug)]
pub struct Workload {
    /// Requests in send order, arrival times assigned.
    pub requests: Vec<RequestSpec>,
    /// How they are issued.
    pub shape: LoadShape,
    /// Stop issuing new requests after this long (closed loop; open loop is pre-trimmed), ms.
    pub duration_ms: Option<f64>,
}

/// Default trace path for a trace workload, relative to the repository root.
pub fn default_trace(kind: WorkloadKind) -> Option<PathBuf> {
    match kind {
        WorkloadKind::Mooncake => Some(PathBuf::from(
            "../shared/workloads/mooncake_synthetic_trace.jsonl",
        )),
        WorkloadKind::Azure => Some(PathBuf::from(
            "../shared/workloads/AzureLLMInferenceTrace_conv.csv",
        )),
        _ => None,
    }
}

/// Builds the workload for a seed.
pub fn build(args: &WorkloadArgs, seed: u64) -> Result<Workload, WorkloadError> {
    if args.token_scale <= 0.0 || !args.token_scale.is_finite() {
        return Err(WorkloadError::Invalid(format!(
            "--token-scale must be > 0, got {}",
            args.token_scale
        )));
    }
    if args.time_scale <= 0.0 || !args.time_scale.is_finite() {
        return Err(WorkloadError::Invalid(format!(
            "--time-scale must be > 0, got {}",
            args.time_scale
        )));
    }
    let trace_path = || {
        args.trace
            .clone()
            .or_else(|| default_trace(args.workload))
            .unwrap_or_default()
    };
    // Items carry trace arrival times (ms) when the workload has them.
    let (mut requests, trace_times) = match args.workload {
        WorkloadKind::SharedPrefix => (shared_prefix::build(args, seed)?, false),
        WorkloadKind::MultiTurn => (multi_turn::build(args, seed)?, false),
        WorkloadKind::Mooncake => (mooncake::build(args, &trace_path())?, true),
        WorkloadKind::Azure => (azure::build(args, &trace_path(), seed)?, true),
        WorkloadKind::Mixed => (mixed::build(args, seed)?, false),
        WorkloadKind::AgentLoop => (agent_loop::build(args, seed)?, false),
    };
    if let Some(n) = args.num_requests {
        requests.truncate(n);
    }
    for (i, r) in requests.iter_mut().enumerate() {
        r.id = i as u64;
    }
    let shape = match LoadShape::from_args(args, trace_times)? {
        LoadShape::Burst if args.workload == WorkloadKind::Mixed && args.request_rate.is_none() => {
            LoadShape::Poisson {
                rate: mixed::DEFAULT_RATE,
            }
        }
        shape => shape,
    };
    assign_arrivals(&mut requests, &shape, seed);
    if let Some(d) = args.duration {
        if shape.is_open_loop() {
            requests.retain(|r| r.arrival_ms <= d * 1000.0);
        }
    }
    if requests.is_empty() {
        return Err(WorkloadError::Invalid(
            "the workload has no requests".into(),
        ));
    }
    Ok(Workload {
        requests,
        shape,
        duration_ms: args.duration.map(|d| d * 1000.0),
    })
}

#[cfg(test)]
pub(crate) mod test_args {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Wrap {
        #[command(flatten)]
        w: WorkloadArgs,
    }

    /// Parses workload flags as the CLI would.
    pub(crate) fn args(flags: &[&str]) -> WorkloadArgs {
        let mut v = vec!["t"];
        v.extend_from_slice(flags);
        Wrap::parse_from(v).w
    }
}

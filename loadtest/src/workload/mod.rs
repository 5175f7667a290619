//! Workloads shared by `run` and `simulate`: each builds a list of [`RequestSpec`]s (prompt
//! content, output length, arrival time) deterministically from a seed.

mod arrivals;
mod azure;
pub mod mixed;
mod mooncake;
mod multi_turn;
mod shared_prefix;

pub use arrivals::{assign_arrivals, LoadShape};

use crate::prompt::Prompt;
use crate::trace::TraceError;
use std::path::PathBuf;

/// Which workload to generate.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum WorkloadKind {
    /// SGLang's generated-shared-prefix: groups x prompts, shared system prompt + question.
    SharedPrefix,
    /// Users x rounds with a shared system prompt and a growing per-user history.
    MultiTurn,
    /// Replay of a Mooncake FAST'25 trace (hash ids -> deterministic token blocks).
    Mooncake,
    /// Azure 2023 arrivals and lengths with synthetic shared prefixes.
    Azure,
    /// Short chats with a long distinct prompt every K-th request (class-labelled report).
    Mixed,
}

/// Workload knobs (shared by `run` and `simulate`).
#[derive(Clone, Debug, clap::Args)]
pub struct WorkloadArgs {
    /// Workload to generate.
    #[arg(long, value_enum)]
    pub workload: WorkloadKind,
    /// Trace file (mooncake, azure). Default: ../shared/workloads/<standard file>.
    #[arg(long)]
    pub trace: Option<PathBuf>,
    /// shared-prefix: number of groups (distinct system prompts).
    #[arg(long, alias = "gsp-num-groups", default_value_t = 64)]
    pub groups: u32,
    /// shared-prefix: prompts per group.
    #[arg(long, alias = "gsp-prompts-per-group", default_value_t = 16)]
    pub prompts_per_group: u32,
    /// shared-prefix / multi-turn / azure / mixed: system prompt tokens (mixed: 16, common to
    /// every request and sent as the chat system message).
    #[arg(long, alias = "gsp-system-prompt-len")]
    pub system_prompt_len: Option<u32>,
    /// shared-prefix / multi-turn: question tokens.
    #[arg(long, alias = "gsp-question-len")]
    pub question_len: Option<u32>,
    /// shared-prefix: output tokens; multi-turn: answer tokens.
    #[arg(long, alias = "gsp-output-len")]
    pub output_len: Option<u32>,
    /// shared-prefix: keep group order instead of shuffling (SGLang shuffles by default).
    #[arg(long)]
    pub ordered: bool,
    /// multi-turn: concurrent users.
    #[arg(long, default_value_t = 32)]
    pub users: u32,
    /// multi-turn: rounds per user.
    #[arg(long, default_value_t = 5)]
    pub rounds: u32,
    /// multi-turn: per-user context tokens sent in round 1.
    #[arg(long, default_value_t = 2000)]
    pub history_len: u32,
    /// azure: number of synthetic shared system prompts.
    #[arg(long, default_value_t = 32)]
    pub azure_groups: u32,
    /// azure: fraction of each prompt that is its group's shared prefix.
    #[arg(long, default_value_t = 0.5)]
    pub azure_prefix_fraction: f64,
    /// mooncake / azure: divide every token length by this factor (a small machine's replay).
    #[arg(long, default_value_t = 1.0)]
    pub token_scale: f64,
    /// mixed: every K-th request (K-th, 2K-th, ...) is a long prompt, the rest short chats; 0 =
    /// short chats only. Both classes share one arrival stream.
    #[arg(long, default_value_t = 8)]
    pub long_every: u32,
    /// mixed: user-message tokens of a short chat (drawn from +/- --short-range-ratio).
    #[arg(long, default_value_t = 48)]
    pub short_input_len: u32,
    /// mixed: a short chat's user message is uniform in len x [1 - r, 1 + r].
    #[arg(long, default_value_t = 0.5)]
    pub short_range_ratio: f64,
    /// mixed: output tokens of a short chat.
    #[arg(long, default_value_t = 64)]
    pub short_output_len: u32,
    /// mixed: tokens of a long prompt after the system prompt (text no other request shares).
    #[arg(long, default_value_t = 2048)]
    pub long_input_len: u32,
    /// mixed: output tokens of a long prompt.
    #[arg(long, default_value_t = 16)]
    pub long_output_len: u32,
    /// Trace arrivals: multiply trace timestamps by this factor (0.5 = twice as fast).
    #[arg(long, default_value_t = 1.0)]
    pub time_scale: f64,
    /// Trace replay: first row to use.
    #[arg(long, default_value_t = 0)]
    pub start_index: usize,
    /// Cap on the number of requests (any workload); mixed: how many to generate (default 120,
    /// or enough for --duration).
    #[arg(long, alias = "num-prompts", alias = "max-requests")]
    pub num_requests: Option<usize>,
    /// Open loop: Poisson arrivals at this many requests/s (synthetic workloads; overrides
    /// trace timestamps when given for a trace workload). mixed: 1 when neither this nor
    /// --concurrency is given.
    #[arg(long)]
    pub request_rate: Option<f64>,
    /// Closed loop: keep this many requests in flight (ignores arrival times).
    #[arg(long, alias = "max-concurrency")]
    pub concurrency: Option<usize>,
    /// Stop issuing requests after this many seconds (wall clock in run, virtual in simulate).
    #[arg(long)]
    pub duration: Option<f64>,
}

/// One request to send.
#[derive(Clone, Debug)]
pub struct RequestSpec {
    /// Index in send order.
    pub id: u64,
    /// Group / session / user id (for the per-request log).
    pub group: u64,
    /// Scheduled arrival, ms since the start (ignored in closed loop).
    pub arrival_ms: f64,
    /// Prompt content.
    pub prompt: Prompt,
    /// Output tokens to generate.
    pub output_tokens: u32,
    /// Class label carried into the report (mixed: `short` / `long`); `None` = unclassed.
    pub class: Option<&'static str>,
    /// Leading prompt segments sent as the chat system message (`--api chat`); 0 = the whole
    /// prompt is one user message.
    pub system_segments: usize,
}

impl RequestSpec {
    /// Prompt tokens.
    pub fn prompt_tokens(&self) -> u32 {
        self.prompt.tokens()
    }
}

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

/// Why a workload could not be built.
#[derive(Debug, thiserror::Error)]
pub enum WorkloadError {
    /// The trace is unreadable or malformed.
    #[error(transparent)]
    Trace(#[from] TraceError),
    /// A knob is out of range.
    #[error("invalid workload setting: {0}")]
    Invalid(String),
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

/// Scales a token length by `1/scale`, keeping at least one token.
pub(crate) fn scale_len(len: u32, scale: f64) -> u32 {
    ((len as f64 / scale).round() as u32).max(1)
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

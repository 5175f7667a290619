//! The workload flags shared by `run` and `simulate`.

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
    /// Agents: one system prompt and tool list, then --rounds tool-call turns per
    /// conversation (--users conversations), sent as chats with tools and tool calls.
    AgentLoop,
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
    /// agent-loop: tokens of each tool result.
    #[arg(long, default_value_t = 128)]
    pub tool_result_len: u32,
    /// multi-turn: concurrent users (agent-loop: conversations).
    #[arg(long, default_value_t = 32)]
    pub users: u32,
    /// multi-turn: rounds per user (agent-loop: requests per conversation).
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

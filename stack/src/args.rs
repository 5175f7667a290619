//! The flags of `warmpath up`, shared by the local stack ([`crate::up`]) and the fronting
//! mode ([`crate::front`]).

use crate::supervise::RestartArgs;
use clap::Args;
use std::path::PathBuf;

/// Flags of `warmpath up`.
#[derive(Args, Clone, Debug)]
pub struct UpArgs {
    /// Gateway port on 127.0.0.1 (the OpenAI-compatible endpoint).
    #[arg(long, default_value_t = 8080)]
    pub port: u16,
    /// Admin port (dashboard, metrics); defaults to `--port` + 1.
    #[arg(long)]
    pub admin_port: Option<u16>,
    /// Number of CPU replicas.
    #[arg(long, default_value_t = 2)]
    pub replicas: usize,
    /// Model: a GGUF file, a HF checkpoint directory or `dummy:NAME`; default
    /// SmolLM2-135M-Instruct Q4_1, fetched into ~/.cache/warmpath/models on first use.
    #[arg(long)]
    pub model: Option<String>,
    /// The dev tenant's API key; generated when not given.
    #[arg(long)]
    pub api_key: Option<String>,
    /// The admin key (dashboard login, `/metrics`, `/admin/*`); generated when not given.
    #[arg(long)]
    pub admin_key: Option<String>,
    /// Routing policy (warm, kv_cost, cache_aware, least_loaded, round_robin, ...).
    #[arg(long, default_value = "warm")]
    pub policy: String,
    /// Compute threads per replica (0 = the machine's cores divided among the replicas).
    #[arg(long, default_value_t = 0)]
    pub threads: usize,
    /// Front servers someone already runs instead of starting replicas: an upstream's base
    /// URL (repeat for more), e.g. a vLLM, SGLang or llama.cpp server.
    #[arg(long = "upstream", value_name = "URL")]
    pub upstreams: Vec<String>,
    /// The engine the `--upstream` servers run: vllm, sglang, llamacpp, openai (any other
    /// OpenAI-compatible server) or warmpath.
    #[arg(long, default_value = "openai", requires = "upstreams")]
    pub engine: String,
    /// The upstreams' tokenizer: a GGUF file, a HF `tokenizer.json`, or a directory holding
    /// `tokenizer.json` and `tokenizer_config.json`. Without it prompts are hashed as text.
    #[arg(long, value_name = "PATH", requires = "upstreams")]
    pub tokenizer: Option<PathBuf>,
    /// When to restart a replica that exited.
    #[command(flatten)]
    pub restart: RestartArgs,
}

//! `gateway [--config FILE] [--listen ADDR] [--replica URL]... [--policy NAME] [--no-auth]`

use clap::Parser;
use gateway::config::{self, Overrides};

use std::path::PathBuf;

/// mimalloc: the request path allocates many small, short-lived objects (Pingora's headers
/// and buffers included), which it serves faster than the system allocator.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// Warmpath gateway: prefix-aware, per-tenant OpenAI endpoint.
#[derive(Parser, Debug)]
#[command(version, about)]
struct Cli {
    /// YAML config file (see configs/gateway.example.yaml).
    #[arg(long)]
    config: Option<PathBuf>,
    /// Data-plane listen address (overrides `listen`).
    #[arg(long)]
    listen: Option<String>,
    /// Admin listen address (overrides `admin_listen`).
    #[arg(long)]
    admin_listen: Option<String>,
    /// Replica base URL, repeatable (replaces `replicas`).
    #[arg(long = "replica")]
    replicas: Vec<String>,
    /// Routing policy by name (overrides `policy`).
    #[arg(long)]
    policy: Option<String>,
    /// Disable API keys. For local use only.
    #[arg(long)]
    no_auth: bool,
}

fn main() -> anyhow::Result<()> {
    gateway::init_logging();
    let cli = Cli::parse();
    let overrides = Overrides {
        listen: cli.listen,
        admin_listen: cli.admin_listen,
        replicas: cli.replicas,
        policy: cli.policy,
        no_auth: cli.no_auth,
    };
    if overrides.no_auth {
        tracing::warn!("--no-auth: every request is accepted without an API key; use only on a trusted machine");
    }
    let cfg = config::load(cli.config.as_ref(), &overrides)?;
    gateway::run(cfg, cli.config, overrides)
}

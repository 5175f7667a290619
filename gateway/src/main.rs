//! `gateway [--config FILE] [--listen ADDR] [--replica URL]... [--policy NAME] [--no-auth]`
//! `gateway epp [--config FILE] [--epp-listen ADDR] [...]`: the Endpoint Picker mode.

use clap::{Parser, Subcommand};
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
    #[arg(long, global = true)]
    config: Option<PathBuf>,
    /// Data-plane listen address (overrides `listen`).
    #[arg(long, global = true)]
    listen: Option<String>,
    /// Admin listen address (overrides `admin_listen`).
    #[arg(long, global = true)]
    admin_listen: Option<String>,
    /// Replica base URL, repeatable (replaces `replicas`).
    #[arg(long = "replica", global = true)]
    replicas: Vec<String>,
    /// Routing policy by name (overrides `policy`).
    #[arg(long, global = true)]
    policy: Option<String>,
    /// Disable API keys. For local use only.
    #[arg(long, global = true)]
    no_auth: bool,
    #[command(subcommand)]
    mode: Option<Mode>,
}

/// Another way to run the same gateway.
#[derive(Subcommand, Debug)]
enum Mode {
    /// The Endpoint Picker for the Gateway API Inference Extension: Envoy's ext_proc gRPC
    /// service on `epp.listen`, the admin listener as the gateway's (docs/epp.md).
    Epp {
        /// ext_proc gRPC listen address (overrides `epp.listen`).
        #[arg(long)]
        epp_listen: Option<String>,
    },
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
    let mut cfg = config::load(cli.config.as_ref(), &overrides)?;
    match cli.mode {
        Some(Mode::Epp { epp_listen }) => {
            if let Some(l) = epp_listen {
                cfg.epp.listen = l;
                cfg.validate()?;
            }
            gateway::run_epp(cfg, cli.config, overrides)
        }
        None => gateway::run(cfg, cli.config, overrides),
    }
}

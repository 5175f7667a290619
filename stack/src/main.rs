//! `warmpath up [--port 8080] [--replicas 2] [--model PATH|dummy:NAME] [--api-key KEY] [--admin-key KEY]`
//! `warmpath up --upstream URL [--upstream URL]... [--engine vllm|sglang|llamacpp|openai] [--tokenizer PATH]`
//! `warmpath epp [--config FILE] [--epp-listen ADDR] ...`: the Endpoint Picker (`gateway epp`)

use clap::{Parser, Subcommand};
use warmpath::up::{self, UpArgs};

/// Warmpath: a prefix-aware LLM gateway and CPU inference replicas.
#[derive(Parser, Debug)]
#[command(name = "warmpath", version, about)]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand, Debug)]
enum Cmd {
    /// Start the gateway and N CPU replicas on 127.0.0.1 until Ctrl-C.
    #[command(after_help = up::EXIT_CODES)]
    Up(Box<UpArgs>),
    /// The Endpoint Picker for the Gateway API Inference Extension (`gateway epp`).
    Epp(warmpath::epp::EppArgs),
}

fn main() -> std::process::ExitCode {
    let args = match Cli::parse().cmd {
        Cmd::Epp(args) => return warmpath::epp::run(args),
        Cmd::Up(args) => *args,
    };
    let rt = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("warmpath: cannot start the runtime: {e}");
            return std::process::ExitCode::FAILURE;
        }
    };
    match rt.block_on(up::run(args)) {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => std::process::ExitCode::from(e.exit_code()),
    }
}

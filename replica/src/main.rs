//! `replica`: Warmpath's inference replica binary.

use clap::{Parser, Subcommand};
use replica::cli::{
    bench::BenchArgs, generate::GenerateArgs, gpu_check::GpuCheckArgs, tokenize::TokenizeArgs,
};
use replica::server::ServeArgs;
use std::io::Write;

#[derive(Parser)]
#[command(name = "replica", version, about = "Warmpath inference replica")]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Serve the OpenAI-compatible API, KV events and metrics.
    Serve(Box<ServeArgs>),
    /// Generate a continuation of one prompt.
    Generate(GenerateArgs),
    /// Print the token ids of a text as a JSON array.
    Tokenize(TokenizeArgs),
    /// Measure prefill and decode throughput.
    Bench(BenchArgs),
    /// Check the CUDA backend: logits against the CPU, throughput, bandwidth floor.
    GpuCheck(GpuCheckArgs),
}

fn main() -> anyhow::Result<()> {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
        )
        .with_writer(std::io::stderr)
        // Plain text unless stderr is a terminal (log files stay greppable).
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .init();
    let cli = Cli::parse();
    let out = match cli.cmd {
        Cmd::Serve(args) => {
            replica::server::run(*args)?;
            return Ok(());
        }
        Cmd::Generate(a) => replica::cli::generate::run(&a)?,
        Cmd::Tokenize(a) => replica::cli::tokenize::run(&a)?,
        Cmd::Bench(a) => replica::cli::bench::run(&a)?,
        Cmd::GpuCheck(a) => replica::cli::gpu_check::run(&a)?,
    };
    let mut stdout = std::io::stdout().lock();
    writeln!(stdout, "{out}")?;
    Ok(())
}

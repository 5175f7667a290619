//! `loadtest` binary: see the library docs and shared/CLI.md.

use clap::Parser;
use loadtest::cli::{Cli, Command};

fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    let level = match cli.verbose {
        0 => tracing::Level::INFO,
        1 => tracing::Level::DEBUG,
        _ => tracing::Level::TRACE,
    };
    tracing_subscriber::fmt()
        .with_max_level(level)
        .with_writer(std::io::stderr)
        .init();
    match cli.command {
        Command::Simulate(args) => loadtest::simulate_cmd::run(&args).map(|_| ()),
        Command::Run(args) => loadtest::run::run_blocking(&args).map(|_| ()),
        Command::Calibrate(args) => loadtest::calibrate::run_blocking(&args),
    }
}

//! Shared by the `loadtest simulate` integration tests: the arguments of a run on the CPU
//! profile, parsed as the command line would be.

#![allow(clippy::unwrap_used, dead_code)] // each test file uses a part

use clap::Parser;
use loadtest::cli::{Cli, Command, SimulateArgs};
use std::path::{Path, PathBuf};

/// The SmolLM2 CPU profile.
pub(crate) fn profile() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../configs/profiles/smollm2-cpu.json")
}

/// `loadtest simulate --quiet --profile <cpu> EXTRA...`, parsed.
pub(crate) fn args<S: AsRef<str>>(extra: &[S]) -> SimulateArgs {
    let p = profile();
    let mut v = vec![
        "loadtest",
        "simulate",
        "--quiet",
        "--profile",
        p.to_str().unwrap(),
    ];
    v.extend(extra.iter().map(AsRef::as_ref));
    let Command::Simulate(a) = Cli::try_parse_from(v).unwrap().command else {
        panic!("not simulate")
    };
    a
}

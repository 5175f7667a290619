//! `warmpath epp [FLAGS]`: the Endpoint Picker for the Gateway API Inference Extension,
//! which is the gateway binary in its `epp` mode (`gateway epp FLAGS`, docs/epp.md): the
//! sibling `gateway` runs in the foreground with the flags as given (`--config FILE`,
//! `--epp-listen ADDR`, ...), and its exit status is this command's.

use crate::launch::sibling;
use std::process::ExitCode;

/// The flags `gateway epp` takes.
#[derive(clap::Args, Debug)]
pub struct EppArgs {
    /// Flags for `gateway epp`: `--config FILE`, `--epp-listen ADDR`, `--admin-listen
    /// ADDR`, `--replica URL`..., `--policy NAME`.
    #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
    pub args: Vec<String>,
}

/// Runs `gateway epp` until it exits (Ctrl-C reaches it too: same process group).
pub fn run(args: EppArgs) -> ExitCode {
    let gateway = match sibling("gateway") {
        Ok(p) => p,
        Err(e) => {
            eprintln!("warmpath epp: {e}");
            return ExitCode::FAILURE;
        }
    };
    match std::process::Command::new(gateway)
        .arg("epp")
        .args(&args.args)
        .status()
    {
        Ok(s) => match s.code() {
            Some(c) => ExitCode::from(u8::try_from(c).unwrap_or(1)),
            // Ended by a signal (Ctrl-C): a stop, as `warmpath up` reports one.
            None => ExitCode::SUCCESS,
        },
        Err(e) => {
            eprintln!("warmpath epp: cannot start the gateway: {e}");
            ExitCode::FAILURE
        }
    }
}

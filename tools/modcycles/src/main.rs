//! `modcycles [--crate-root] ROOT.rs...`: prints each root's module cycles and exits 1
//! when any root has one (2 when a root cannot be read).

use std::path::PathBuf;
use std::process::ExitCode;

const USAGE: &str = "usage: modcycles [--crate-root] <crate root .rs file>...
Reads each crate's module tree from its root file (e.g. gateway/src/lib.rs) and fails
when modules import each other in a cycle. #[cfg(test)] code is not counted.";

fn main() -> ExitCode {
    let mut roots = Vec::new();
    for arg in std::env::args().skip(1) {
        match arg.as_str() {
            "-h" | "--help" => {
                println!("{USAGE}");
                return ExitCode::SUCCESS;
            }
            "--crate-root" => {}
            a if a.starts_with('-') => {
                eprintln!("modcycles: unknown option {a}\n{USAGE}");
                return ExitCode::from(2);
            }
            a => roots.push(PathBuf::from(a)),
        }
    }
    if roots.is_empty() {
        eprintln!("{USAGE}");
        return ExitCode::from(2);
    }
    let mut cyclic = false;
    for root in &roots {
        match modcycles::check(root) {
            Ok(report) => {
                println!("{report}");
                cyclic |= !report.cycles.is_empty();
            }
            Err(e) => {
                eprintln!("modcycles: {e:#}");
                return ExitCode::from(2);
            }
        }
    }
    if cyclic {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    }
}

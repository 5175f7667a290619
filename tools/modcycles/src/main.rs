//! `modcycles [--crate-root] [--forbid FROM=TO]... ROOT.rs...`: prints each root's module
//! cycles and broken layering rules, and exits 1 when any root has one (2 when a root
//! cannot be read or an argument is wrong).

use std::path::PathBuf;
use std::process::ExitCode;

const USAGE: &str = "usage: modcycles [--crate-root] [--forbid FROM=TO]... <crate root .rs file>...
Reads each crate's module tree from its root file (e.g. gateway/src/lib.rs) and fails
when modules import each other in a cycle, or when a module under FROM depends on one
under TO, directly or through others (--forbid control=proxy). #[cfg(test)] code is not
counted.";

fn main() -> ExitCode {
    let mut roots = Vec::new();
    let mut rules = Vec::new();
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--forbid" => match args.next().map(|r| modcycles::Rule::parse(&r)) {
                Some(Ok(rule)) => rules.push(rule),
                Some(Err(e)) => {
                    eprintln!("modcycles: --forbid {e:#}");
                    return ExitCode::from(2);
                }
                None => {
                    eprintln!("modcycles: --forbid needs FROM=TO\n{USAGE}");
                    return ExitCode::from(2);
                }
            },
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
        match modcycles::check_with(root, &rules) {
            Ok(report) => {
                println!("{report}");
                cyclic |= !report.ok();
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

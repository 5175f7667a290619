//! The binary's output and exit status.

use std::path::PathBuf;
use std::process::{Command, Output};

fn run(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_modcycles"))
        .args(args)
        .current_dir(PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures"))
        .output()
        .expect("runs modcycles")
}

fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn a_cycle_exits_1_and_prints_each_edge_with_a_location() {
    let out = run(&["use_cycle/src/lib.rs"]);
    let text = stdout(&out);
    assert_eq!(out.status.code(), Some(1), "{text}");
    assert!(text.contains("cycle 1 (2 modules): a, b"), "{text}");
    assert!(text.contains("a -> b  (use_cycle/src/a.rs:1)"), "{text}");
    assert!(text.contains("b -> a  (use_cycle/src/b.rs:3)"), "{text}");
    assert!(
        text.ends_with("modcycles: use_cycle/src/lib.rs: 3 modules, 2 edges, 1 cycles\n"),
        "{text}"
    );
}

#[test]
fn acyclic_roots_exit_0_and_any_cyclic_root_fails_the_run() {
    let ok = run(&["--crate-root", "acyclic/src/lib.rs", "test_mod/src/lib.rs"]);
    assert_eq!(ok.status.code(), Some(0), "{}", stdout(&ok));
    assert_eq!(
        stdout(&ok).matches(", 0 cycles").count(),
        2,
        "{}",
        stdout(&ok)
    );
    let mixed = run(&["acyclic/src/lib.rs", "use_cycle/src/lib.rs"]);
    assert_eq!(mixed.status.code(), Some(1), "{}", stdout(&mixed));
}

#[test]
fn an_unreadable_root_exits_2_with_the_reason() {
    let out = run(&["no/such/lib.rs"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("reading no/such/lib.rs"), "{err}");
    assert_eq!(run(&[]).status.code(), Some(2));
}

#[test]
fn a_forbidden_dependency_fails_with_the_chain_that_makes_it() {
    // In `acyclic`, b -> c::d: b depends on c (through its child d).
    let out = run(&["--forbid", "b=c", "acyclic/src/lib.rs"]);
    let text = stdout(&out);
    assert_eq!(out.status.code(), Some(1), "{text}");
    assert!(text.contains("layering: b must not depend on c"), "{text}");
    assert!(text.contains("b -> c::d  (acyclic/src/b.rs:"), "{text}");
    assert!(text.ends_with(", 1 layering rules broken\n"), "{text}");
    // a reaches c through b and directly; c reaches nothing under a.
    let chain = stdout(&run(&["--forbid", "a=c::d", "acyclic/src/lib.rs"]));
    assert!(
        chain.contains("layering: a must not depend on c::d"),
        "{chain}"
    );
    let ok = run(&["--forbid", "c=a", "acyclic/src/lib.rs"]);
    assert_eq!(ok.status.code(), Some(0), "{}", stdout(&ok));
    let bad = run(&["--forbid", "c", "acyclic/src/lib.rs"]);
    assert_eq!(bad.status.code(), Some(2));
}

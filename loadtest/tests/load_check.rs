//! The pre-run load check of `loadtest simulate`, through the binary: an obviously
//! overloaded configuration prints a WARNING with what would fit, a light one does not.

#![allow(clippy::unwrap_used)] // test helpers: a panic is the failure report

use std::path::Path;
use std::process::Command;

fn simulate(extra: &[&str]) -> (bool, String) {
    let profile =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../configs/profiles/smollm2-cpu.json");
    let out = Command::new(env!("CARGO_BIN_EXE_loadtest"))
        .args(["simulate", "--workload", "shared-prefix", "--groups", "4"])
        .args(["--prompts-per-group", "5", "--system-prompt-len", "256"])
        .args([
            "--question-len",
            "32",
            "--output-len",
            "4",
            "--policy",
            "warm",
        ])
        .args(["--profile", profile.to_str().unwrap(), "--seed", "1"])
        .args(extra)
        .output()
        .unwrap();
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn an_overloaded_cluster_is_warned_about_and_a_light_one_is_not() {
    // 20 requests of 288 prompt tokens at 200/s on one 555 tokens/s replica: ~100x over.
    let (ok, err) = simulate(&["--replicas", "1", "--request-rate", "200"]);
    assert!(ok, "{err}");
    assert!(err.contains("WARNING: overloaded"), "{err}");
    assert!(err.contains("what 1 replica of smollm2-cpu"), "{err}");
    // It names a configuration that fits: more replicas, the GPU profile, a lower rate.
    assert!(err.contains("would fit"), "{err}");
    assert!(err.contains("gpu-h100-class.json --replicas"), "{err}");
    assert!(err.contains("; --request-rate "), "{err}");

    // The same 20 requests at 0.2/s on 4 replicas: a few percent busy.
    let (ok, err) = simulate(&["--replicas", "4", "--request-rate", "0.2"]);
    assert!(ok, "{err}");
    assert!(!err.contains("WARNING"), "{err}");
    assert!(err.contains("load check: offered load"), "{err}");

    // --quiet hides the estimate, never the warning.
    let (_, err) = simulate(&["--replicas", "1", "--request-rate", "200", "--quiet"]);
    assert!(err.contains("WARNING: overloaded"), "{err}");
    let (_, err) = simulate(&["--replicas", "4", "--request-rate", "0.2", "--quiet"]);
    assert!(!err.contains("load check"), "{err}");
}

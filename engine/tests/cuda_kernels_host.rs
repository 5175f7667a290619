//! The CUDA kernels' source, compiled for the host and checked against naive references
//! without a GPU (feature `cuda`; needs g++ with C++20). `tests/cuda_host/shim.h` runs
//! each CUDA thread of a block on an OS thread, so barriers and warp shuffles behave as
//! on the device; `tests/cuda_host/check.cpp` holds the references and tolerances.
#![cfg(feature = "cuda")]

use std::path::PathBuf;
use std::process::Command;

const SHIM: &str = include_str!("cuda_host/shim.h");
const CHECK: &str = include_str!("cuda_host/check.cpp");

fn scratch_dir() -> PathBuf {
    let d = std::env::temp_dir().join(format!("warmpath-cuda-host-{}", std::process::id()));
    std::fs::create_dir_all(&d).expect("create scratch dir");
    d
}

#[test]
fn cuda_kernels_match_references_when_emulated_on_the_host() {
    let gxx = std::env::var("CXX").unwrap_or_else(|_| "g++".into());
    let found = Command::new(&gxx).arg("--version").output();
    assert!(
        found.map(|o| o.status.success()).unwrap_or(false),
        "{gxx} not found: install a C++20 compiler (apt-get install g++) to check the CUDA kernels"
    );
    let dir = scratch_dir();
    std::fs::write(dir.join("shim.h"), SHIM).unwrap();
    std::fs::write(dir.join("check.cpp"), CHECK).unwrap();
    std::fs::write(
        dir.join("kernels_host.h"),
        warmpath_engine::cuda::KERNEL_SOURCE,
    )
    .unwrap();
    let exe = dir.join("check");
    let out = Command::new(&gxx)
        .args(["-std=c++20", "-O1", "-pthread", "-w", "check.cpp", "-o"])
        .arg(&exe)
        .current_dir(&dir)
        .output()
        .expect("run the compiler");
    assert!(
        out.status.success(),
        "the kernel source does not compile for the host:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let run = Command::new(&exe).output().expect("run the check");
    let stdout = String::from_utf8_lossy(&run.stdout);
    let _ = std::fs::remove_dir_all(&dir);
    assert!(
        run.status.success() && stdout.contains("all kernels match: 0 failures"),
        "kernel mismatches:\n{stdout}"
    );
}

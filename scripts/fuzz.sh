#!/usr/bin/env bash
# Fuzz the gateway's parsers and the tokenizer (fuzz/, a stable-Rust mutation driver):
# replays the committed seeds (fuzz/corpus/TARGET/) and saved crashes (fuzz/crashes/),
# then runs each target for SECONDS_PER_TARGET (default 60) of random edits.
#
#   scripts/fuzz.sh [SECONDS_PER_TARGET] [TARGET]      (SEED=n to repeat a run)
#
# A crash is saved to fuzz/crashes/TARGET-HASH and the script fails; fix it, keep the
# file (it is replayed on every later run) and add a unit test for it where the parser lives.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build -q -p warmpath-fuzz
./target/debug/warmpath-fuzz "${2:-all}" "${1:-60}"

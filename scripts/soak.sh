#!/usr/bin/env bash
# Soak (reliability matrix G1): sustained mixed load (streaming and non-streaming, bad
# requests, clients that hang up mid-stream) against the gateway and two mock replicas,
# failing if the gateway's RSS or open file descriptors grow by 5 % or more between the end
# of the warm-up and the end of the run.
#
#   DURATION=600 WORKERS=4 scripts/soak.sh
#
# DURATION: seconds of measured load (default 600); WORKERS: concurrent clients (default 4).
# The figures are printed on the line starting with SOAK.
set -euo pipefail
cd "$(dirname "$0")/.."
export DURATION="${DURATION:-600}" WORKERS="${WORKERS:-4}"
cargo build -q -p gateway --bins
log="$(mktemp)"
trap 'rm -f "$log"' EXIT
status=0
cargo test -q -p warmpath-e2e --test soak -- --ignored --nocapture >"$log" 2>&1 || status=$?
cat "$log"
grep '^SOAK ' "$log" || echo "soak: no figures (the run failed before measuring)"
exit "$status"

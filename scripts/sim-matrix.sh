#!/usr/bin/env bash
# Policy comparison in the simulator (BENCHMARKS.md, issue 6): every router-policy policy,
# 4 scenarios (seed 1), plus shared-prefix-8 at seeds 2 and 3.
# Run from the repo root after
#   cargo build --release -p loadtest
# as: scripts/sim-matrix.sh OUTDIR   (then: python3 scripts/sim-table.py OUTDIR)
set -euo pipefail
LT=${LT:-${CARGO_TARGET_DIR:-target}/release/loadtest}
OUT=${1:-target/sim-matrix}
mkdir -p "$OUT"
GPU=configs/profiles/gpu-h100-class.json
POLICIES=(--policy warm --policy round_robin --policy random --policy least_loaded
  --policy consistent_hash --policy cache_aware --policy kv_cost)
run() { # name, seed, args...
  local name=$1 seed=$2; shift 2
  echo "== $name: loadtest simulate $* --seed $seed"
  /usr/bin/time -f "$name wall %e s, max RSS %M KB" "$LT" simulate "$@" --profile $GPU \
    --seed "$seed" --quiet "${POLICIES[@]}" --json "$OUT/$name.json" 2>&1 | grep -v INFO
}
MC=(--workload mooncake --trace ../shared/workloads/mooncake_synthetic_trace.jsonl)
run mooncake-8  1 "${MC[@]}" --replicas 8
run mooncake-64 1 "${MC[@]}" --replicas 64 --time-scale 0.125
run shared-prefix-8  1 --workload shared-prefix --replicas 8  --groups 64  --request-rate 40
run shared-prefix-64 1 --workload shared-prefix --replicas 64 --groups 512 --request-rate 320
run shared-prefix-8-seed2 2 --workload shared-prefix --replicas 8 --groups 64 --request-rate 40
run shared-prefix-8-seed3 3 --workload shared-prefix --replicas 8 --groups 64 --request-rate 40

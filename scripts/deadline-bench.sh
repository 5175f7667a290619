#!/usr/bin/env bash
# Deadline goodput benchmark (issue 42, "Done when" line 3), live: two CPU replicas of
# SmolLM2-135M behind one gateway with flow control. First the fleet's capacity for the
# request shape (closed loop, CONC workers); then open-loop Poisson traffic at 1.0x and
# 1.5x that capacity, each twice in the same run: without an objective (requests queue
# first come, first served, as before issue 42) and with `x-slo-ttft-ms: OBJECTIVE_MS`
# (the gateway sheds what the `warm` prediction or the wait says cannot make it). Goodput
# is the requests whose first token came within OBJECTIVE_MS, per second, in both arms.
#
#   scripts/deadline-bench.sh                       # release builds of both binaries
#   SKIP_BUILD=1 SECONDS_PER_PHASE=40 OBJECTIVE_MS=1500 scripts/deadline-bench.sh
#
# Knobs (environment): GATEWAY (target/release/gateway), REPLICA (target/release/replica),
# SECONDS_PER_PHASE (30), OBJECTIVE_MS (2000), CONC (4), IN_FLIGHT
# (admission.max_in_flight_per_replica, 2), WORDS (prompt words, 60), LOADS ("1.0 1.5"),
# MODEL_PATH (~/.cache/warmpath/models/SmolLM2-135M-Instruct.Q4_1.gguf).
set -euo pipefail
cd "$(dirname "$0")/.."
GATEWAY=${GATEWAY:-target/release/gateway}
REPLICA=${REPLICA:-target/release/replica}
MODEL_PATH=${MODEL_PATH:-$HOME/.cache/warmpath/models/SmolLM2-135M-Instruct.Q4_1.gguf}
SECS=${SECONDS_PER_PHASE:-30}
OBJ=${OBJECTIVE_MS:-2000}
CONC=${CONC:-4}
IN_FLIGHT=${IN_FLIGHT:-2}
WORDS=${WORDS:-60}
LOADS=${LOADS:-1.0 1.5}
[ -f "$MODEL_PATH" ] || MODEL_PATH=$(scripts/fetch-model.sh)
command -v python3 >/dev/null || { echo "deadline-bench: python3 is needed" >&2; exit 1; }
if [ "${SKIP_BUILD:-0}" != 1 ]; then
  cargo build -q --release -p gateway -p replica --bins
fi
work=$(mktemp -d)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  rm -rf "$work"
}
trap cleanup EXIT
# shellcheck source=lib/cpu-replicas.sh
. scripts/lib/cpu-replicas.sh
start_cpu_replicas
port=$(free_port)
admin=$(free_port)
cat >"$work/gateway.yaml" <<YAML
listen: 127.0.0.1:$port
admin_listen: 127.0.0.1:$admin
auth: {enabled: true, salt_secret: deadline-bench-secret-0123456789}
tenants:
  - {id: d, api_key_sha256: [$(printf '%s' key-d | sha256sum | cut -d' ' -f1)], models: ["*"]}
replicas: [${replicas[0]}, ${replicas[1]}]
admission: {max_in_flight_per_replica: $IN_FLIGHT, max_queue: 4096, queue_timeout_ms: 120000}
timeouts: {first_token_ms: 120000}
YAML
"$GATEWAY" --config "$work/gateway.yaml" >"$work/gateway.log" 2>&1 &
pids+=($!)
for _ in $(seq 1 300); do
  curl -sf "http://127.0.0.1:$port/ready" >/dev/null && break
  sleep 0.1
done
drive() { python3 scripts/deadline_bench.py --addr "127.0.0.1:$port" --model "$model" \
  --seconds "$SECS" --words "$WORDS" --count-ms "$OBJ" "$@"; }

echo "# $(date -u +%FT%TZ) $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg); 2 replicas x 1 thread," \
  "in flight per replica $IN_FLIGHT, $SECS s per phase, objective $OBJ ms, $WORDS-word prompts"
# Warm-up: the replicas measure their prefill rate (the `warm` prediction uses it).
drive --phase capacity --conc "$CONC" --seconds 5 >/dev/null
cap=$(drive --phase capacity --conc "$CONC")
echo "$cap"
per_s=$(echo "$cap" | python3 -c 'import json,sys; print(json.load(sys.stdin)["per_s"])')
for load in $LOADS; do
  rate=$(python3 -c "print(round($per_s * $load, 3))")
  for arm in fcfs objective; do
    extra=()
    [ "$arm" = objective ] && extra=(--objective-ms "$OBJ")
    # A fresh seed per phase: nothing is cached from an earlier phase.
    drive --phase open --rate "$rate" --seed "$RANDOM" "${extra[@]}" |
      sed "s/^{/{\"load\": $load, \"arm\": \"$arm\", /"
    # Let the queue drain before the next phase.
    sleep 2
  done
done

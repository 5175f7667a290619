#!/usr/bin/env bash
# Priority under overload (issue 42, "Done when" line 2), live: two CPU replicas of
# SmolLM2-135M behind one gateway with flow control. First the fleet's capacity for the
# request shape (closed loop, CONC workers); then, open loop (Poisson), interactive
# requests at INTERACTIVE x capacity alone ("unloaded"), and the same interactive stream
# beside `x-priority: batch` requests at BATCH x capacity ("overload": 1.5x capacity in
# all at the defaults). Reports each class's TTFT and what was served; every batch request
# must be served (the queue bounds are set so that none is refused), after the phase if
# need be.
#
#   scripts/priority-bench.sh                       # release builds of both binaries
#   SKIP_BUILD=1 SECONDS_PER_PHASE=60 scripts/priority-bench.sh
#
# Knobs (environment): GATEWAY (target/release/gateway), REPLICA (target/release/replica),
# SECONDS_PER_PHASE (40), CONC (4), IN_FLIGHT (admission.max_in_flight_per_replica, 1),
# INTERACTIVE (0.5), BATCH (1.0), WORDS (prompt words, 60), MODEL_PATH
# (~/.cache/warmpath/models/SmolLM2-135M-Instruct.Q4_1.gguf).
set -euo pipefail
cd "$(dirname "$0")/.."
GATEWAY=${GATEWAY:-target/release/gateway}
REPLICA=${REPLICA:-target/release/replica}
MODEL_PATH=${MODEL_PATH:-$HOME/.cache/warmpath/models/SmolLM2-135M-Instruct.Q4_1.gguf}
SECS=${SECONDS_PER_PHASE:-40}
CONC=${CONC:-4}
IN_FLIGHT=${IN_FLIGHT:-1}
INTERACTIVE=${INTERACTIVE:-0.5}
BATCH=${BATCH:-1.0}
WORDS=${WORDS:-60}
[ -f "$MODEL_PATH" ] || MODEL_PATH=$(scripts/fetch-model.sh)
command -v python3 >/dev/null || { echo "priority-bench: python3 is needed" >&2; exit 1; }
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
auth: {enabled: true, salt_secret: priority-bench-secret-0123456789}
tenants:
  - id: d
    api_key_sha256: [$(printf '%s' key-d | sha256sum | cut -d' ' -f1)]
    models: ["*"]
    flow: {classes: [interactive, batch]}
replicas: [${replicas[0]}, ${replicas[1]}]
admission:
  max_in_flight_per_replica: $IN_FLIGHT
  max_queue: 4096
  queue_timeout_ms: 600000
  flow: {max_queued_per_tenant: 4096}
timeouts: {first_token_ms: 600000}
YAML
"$GATEWAY" --config "$work/gateway.yaml" >"$work/gateway.log" 2>&1 &
pids+=($!)
for _ in $(seq 1 300); do
  curl -sf "http://127.0.0.1:$port/ready" >/dev/null && break
  sleep 0.1
done
drive() { python3 scripts/deadline_bench.py --addr "127.0.0.1:$port" --model "$model" \
  --seconds "$SECS" --words "$WORDS" "$@"; }

echo "# $(date -u +%FT%TZ) $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg); 2 replicas x 1 thread," \
  "in flight per replica $IN_FLIGHT, $SECS s per phase, $WORDS-word prompts," \
  "interactive ${INTERACTIVE}x, batch ${BATCH}x capacity"
# Warm-up: the replicas measure their prefill rate (the `warm` prediction uses it).
drive --phase capacity --conc "$CONC" --seconds 5 >/dev/null
cap=$(drive --phase capacity --conc "$CONC")
echo "$cap"
per_s=$(echo "$cap" | python3 -c 'import json,sys; print(json.load(sys.stdin)["per_s"])')
irate=$(python3 -c "print(round($per_s * $INTERACTIVE, 3))")
brate=$(python3 -c "print(round($per_s * $BATCH, 3))")
# The same interactive arrival times in both phases (--seed); new prompt words per phase
# (--prompt-seed): nothing is cached from an earlier phase.
seed=$RANDOM
drive --phase open --rate "$irate" --seed "$seed" --prompt-seed 1 | sed 's/^{/{"arm": "unloaded", /'
sleep 2
drive --phase open --rate "$irate" --batch-rate "$brate" --seed "$seed" --prompt-seed 2 |
  sed 's/^{/{"arm": "overload", /'

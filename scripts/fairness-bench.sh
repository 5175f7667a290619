#!/usr/bin/env bash
# Fairness benchmark (issue 42, "Done when" line 1): two CPU replicas on SmolLM2-135M,
# open-loop traffic; tenant B sends short streaming chats at a steady B_RATE per second;
# tenant A either idles or sends new ~400-token prompts at A_FACTOR times B's rate (a
# burst within its limits, far above what two CPU replicas serve). B's TTFT p50/p99
# alone and with A's burst, through this branch's gateway and, in the same run and the
# same way, through BASELINE_GATEWAY (today's main). A third phase tags A's requests
# `x-priority: batch`.
#
#   BASELINE_GATEWAY=/work/bin-main/gateway BASELINE_REPLICA=/work/bin-main/replica \
#     scripts/fairness-bench.sh
#   SECONDS_PER_PHASE=60 B_RATE=1 A_FACTOR=10 IN_FLIGHT=2 scripts/fairness-bench.sh
#
# Knobs (environment): GATEWAY (target/release/gateway, built here), REPLICA
# (target/release/replica), BASELINE_GATEWAY (unset: skip), BASELINE_REPLICA (the
# baseline arm's replicas; REPLICA), RESERVE (admission.flow.reserve_per_replica of this
# gateway; unset: its default), SECONDS_PER_PHASE (40),
# B_RATE (1), A_FACTOR (10), IN_FLIGHT (admission.max_in_flight_per_replica for both
# gateways, 2), PHASES ("alone burst burst-batch"), MODEL_PATH
# (~/.cache/warmpath/models/SmolLM2-135M-Instruct.Q4_1.gguf: scripts/fetch-model.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_INCREMENTAL=${CARGO_INCREMENTAL:-0} CARGO_PROFILE_DEV_DEBUG=${CARGO_PROFILE_DEV_DEBUG:-false}
GATEWAY=${GATEWAY:-target/release/gateway}
REPLICA=${REPLICA:-target/release/replica}
MODEL_PATH=${MODEL_PATH:-$HOME/.cache/warmpath/models/SmolLM2-135M-Instruct.Q4_1.gguf}
SECS=${SECONDS_PER_PHASE:-40}
B_RATE=${B_RATE:-1}
A_FACTOR=${A_FACTOR:-10}
IN_FLIGHT=${IN_FLIGHT:-2}
PHASES=${PHASES:-alone burst burst-batch}
if [ ! -f "$MODEL_PATH" ]; then
  echo "fairness-bench: $MODEL_PATH missing: run scripts/fetch-model.sh" >&2
  exit 1
fi
command -v python3 >/dev/null || { echo "fairness-bench: python3 is needed" >&2; exit 1; }
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

hash_key() { printf '%s' "$1" | sha256sum | cut -d' ' -f1; }

# shellcheck source=lib/cpu-replicas.sh
. scripts/lib/cpu-replicas.sh

run_gateway() { # NAME GATEWAY_BINARY REPLICA_BINARY: each arm on its own fresh replicas
  local name=$1 bin=$2 port admin first=${#pids[@]}
  REPLICA=$3 start_cpu_replicas
  port=$(free_port)
  admin=$(free_port)
  cat >"$work/$name.yaml" <<YAML
listen: 127.0.0.1:$port
admin_listen: 127.0.0.1:$admin
auth: {enabled: true, salt_secret: fairness-bench-secret-0123456789}
tenants:
  - {id: a, api_key_sha256: [$(hash_key key-a)], models: ["*"]}
  - {id: b, api_key_sha256: [$(hash_key key-b)], models: ["*"]}
replicas: [${replicas[0]}, ${replicas[1]}]
admission: {max_in_flight_per_replica: $IN_FLIGHT, max_queue: 256, queue_timeout_ms: 60000$FLOW_KEYS}
timeouts: {first_token_ms: 60000}
YAML
  "$bin" --config "$work/$name.yaml" >"$work/$name.log" 2>&1 &
  local gw=$!
  pids+=($gw)
  for _ in $(seq 1 300); do
    curl -sf "http://127.0.0.1:$port/ready" >/dev/null && break
    sleep 0.1
  done
  for phase in $PHASES; do
    set -- ${phase/-/ }
    python3 scripts/fairness_bench.py --addr "127.0.0.1:$port" --model "$model" \
      --mode "$1" --seconds "$SECS" --b-rate "$B_RATE" --a-factor "$A_FACTOR" ${2:+--a-priority $2} \
      | sed "s/^{/{\"gateway\": \"$name\", /"
    if [ "${DUMP:-0}" = 1 ]; then
      # Where B's time went: its queue time per request (decision log) and the flow series.
      curl -s "http://127.0.0.1:$admin/admin/decisions?limit=400" | python3 -c '
import json, sys
d = [x for x in json.load(sys.stdin) if x.get("tenant") == "b"]
print("  b decisions:", [(x.get("queued_ms"), x["decision"]["replica"], len(x["decision"]["fallbacks"])) for x in d][:20])' || true
      curl -s "http://127.0.0.1:$admin/metrics" | grep -E 'flow_(queue_seconds_(sum|count)|shed)' | sed 's/^/  /' || true
    fi
  done
  for p in "${pids[@]:$first}"; do kill "$p" 2>/dev/null || true; wait "$p" 2>/dev/null || true; done
}

echo "# $(date -u +%FT%TZ) $(nproc) cores, $(lscpu | sed -n 's/^Model name: *//p'), load $(cut -d' ' -f1-3 /proc/loadavg);" \
  "2 replicas x 1 thread, SmolLM2-135M Q4_1; in-flight per replica $IN_FLIGHT; $SECS s per phase; B $B_RATE/s, A ${A_FACTOR}x"
if [ -n "${BASELINE_GATEWAY:-}" ]; then
  FLOW_KEYS="" run_gateway baseline "$BASELINE_GATEWAY" "${BASELINE_REPLICA:-$REPLICA}"
fi
FLOW_KEYS=${RESERVE:+", flow: {reserve_per_replica: $RESERVE}"} run_gateway flow "$GATEWAY" "$REPLICA"

# Shared by scripts/live-compare.sh and scripts/live-disagg.sh (source it after setting
# SCRIPT, OUT_DIR, BIN, MODEL, KV_MEMORY, REPLICA_THREADS, START_TIMEOUT): fresh release
# replicas and a gateway on free loopback ports, each killed on exit.
# shellcheck shell=bash

die() {
  echo "$SCRIPT: $*" >&2
  echo "$SCRIPT: logs and outputs are in $OUT_DIR" >&2
  exit 1
}
for tool in curl python3; do
  command -v $tool >/dev/null || die "$tool is missing (install it: apt-get install $tool)"
done

if [ -z "${MODEL:-}" ]; then
  MODEL=$HOME/.cache/warmpath/models/SmolLM2-135M-Instruct.Q4_1.gguf
  [ -f "$MODEL" ] || MODEL=$(scripts/fetch-model.sh) || die "no model: run scripts/fetch-model.sh or set MODEL"
fi
[ -f "$MODEL" ] || die "model $MODEL not found (scripts/fetch-model.sh fetches it)"

PIDS=()
cleanup() {
  local p
  for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
  for p in "${PIDS[@]}"; do
    for _ in $(seq 50); do kill -0 "$p" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$p" 2>/dev/null || true
    { wait "$p"; } 2>/dev/null || true
  done
  PIDS=()
}
trap 'cleanup' EXIT
trap 'cleanup; exit 130' INT TERM

free_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

# wait_http NAME PID URL LOG: until URL answers 2xx, the process dies, or START_TIMEOUT passes.
wait_http() {
  local name=$1 pid=$2 url=$3 log=$4 t0=$SECONDS
  until curl -sf -o /dev/null --max-time 2 "$url"; do
    if ! kill -0 "$pid" 2>/dev/null; then
      tail -n 20 "$log" >&2 || true
      die "$name exited before answering $url (log: $log)"
    fi
    if [ $((SECONDS - t0)) -ge "$START_TIMEOUT" ]; then
      tail -n 20 "$log" >&2 || true
      die "$name did not answer $url within ${START_TIMEOUT}s (log: $log)"
    fi
    sleep 0.5
  done
}

# start_replica TAG [ARG...]: starts a fresh replica (extra `replica serve` args after the
# tag); sets REPLICA_URL and MODEL_ID.
start_replica() {
  local tag=$1 port log
  shift
  port=$(free_port)
  log=$OUT_DIR/replica-$tag.log
  RUST_LOG=${RUST_LOG:-info} "$BIN/replica" serve --model "$MODEL" --port "$port" \
    --kv-memory "$KV_MEMORY" --threads "$REPLICA_THREADS" "$@" >"$log" 2>&1 &
  PIDS+=($!)
  REPLICA_URL=http://127.0.0.1:$port
  wait_http "replica $tag" "$!" "$REPLICA_URL/health" "$log"
  MODEL_ID=$(curl -sf --max-time 5 "$REPLICA_URL/v1/models" |
    python3 -c 'import json,sys; print(json.load(sys.stdin)["data"][0]["id"])') ||
    die "replica $tag at $REPLICA_URL lists no model at /v1/models (log: $log)"
}

# start_gateway POLICY URL...: sets GATEWAY_URL; waits until every replica is registered.
start_gateway() {
  local policy=$1 port admin log pid args=() u
  shift
  port=$(free_port)
  admin=$(free_port)
  log=$OUT_DIR/gateway-$policy.log
  for u in "$@"; do args+=(--replica "$u"); done
  # A busy 1-thread CPU replica answers the gateway's one-token health probe only after its
  # queue (seconds of prefill): with the default 2 s probe deadline the gateway ejects healthy
  # replicas mid-run, which would measure the health checker instead of the routing policy.
  cat >"$OUT_DIR/gateway.yaml" <<YAML
health: {probe_interval_ms: 2000, probe_timeout_ms: 600000, eject_after_failures: 1000000}
timeouts: {first_token_ms: 600000, idle_ms: 600000}
${GATEWAY_EXTRA_YAML:-}
YAML
  "$BIN/gateway" --config "$OUT_DIR/gateway.yaml" --no-auth --listen "127.0.0.1:$port" --admin-listen "127.0.0.1:$admin" \
    --policy "$policy" "${args[@]}" >"$log" 2>&1 &
  pid=$!
  PIDS+=($pid)
  GATEWAY_URL=http://127.0.0.1:$port
  GATEWAY_ADMIN=http://127.0.0.1:$admin
  wait_http "gateway ($policy)" "$pid" "$GATEWAY_URL/health" "$log"
  local t0=$SECONDS n=0
  while :; do
    n=$(curl -sf --max-time 2 "http://127.0.0.1:$admin/admin/replicas" |
      python3 -c 'import json,sys; print(sum(r["health"]["state"] == "healthy" for r in json.load(sys.stdin)["replicas"]))' 2>/dev/null || echo 0)
    [ "$n" -ge "$#" ] && curl -sf --max-time 2 "$GATEWAY_URL/v1/models" | grep -F "\"$MODEL_ID\"" >/dev/null && break
    [ $((SECONDS - t0)) -ge "$START_TIMEOUT" ] && die "gateway ($policy) has $n of $# replicas healthy (or does not list $MODEL_ID) after ${START_TIMEOUT}s (log: $log)"
    sleep 0.5
  done
}


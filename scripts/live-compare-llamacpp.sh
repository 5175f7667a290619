#!/usr/bin/env bash
# Live policy comparison in front of two real llama.cpp servers (issue #23, BENCHMARKS.md):
# for each workload (shared-prefix, multi-turn) and each policy, starts two fresh
# `llama-server`s (scripts/llama-server.sh builds the pinned version once) serving SmolLM2,
# a gateway with `engine: llamacpp` and the GGUF tokenizer, runs `loadtest run`, and prints
# TTFT p50/p99 and the engine-reported cache reuse (llama-server's `timings.cache_n` over
# prompt tokens).
#
#   scripts/live-compare-llamacpp.sh
#   POLICIES="round_robin warm" WORKLOADS=shared-prefix scripts/live-compare-llamacpp.sh
#
# Knobs (environment): POLICIES, WORKLOADS, SLOTS (per server, -np), CTX (per server, -c),
# RATE (requests/s, Poisson), SEED, SKIP_BUILD (1/0), OUT_DIR, START_TIMEOUT (s).
# Every process it starts is killed on exit; logs and JSON stay in OUT_DIR.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$ROOT/target}
BIN=$CARGO_TARGET_DIR/release
POLICIES=${POLICIES:-"round_robin cache_aware warm"}
WORKLOADS=${WORKLOADS:-"shared-prefix multi-turn"}
SLOTS=${SLOTS:-4}
CTX=${CTX:-8192}
RATE=${RATE:-1}
SEED=${SEED:-1}
SKIP_BUILD=${SKIP_BUILD:-0}
START_TIMEOUT=${START_TIMEOUT:-180}
OUT_DIR=${OUT_DIR:-$(mktemp -d /tmp/live-llamacpp.XXXXXX)}
mkdir -p "$OUT_DIR"

die() { echo "live-compare-llamacpp: $*" >&2; echo "logs: $OUT_DIR" >&2; exit 1; }
for tool in curl python3; do command -v $tool >/dev/null || die "$tool is missing"; done
MODEL=${MODEL:-$(scripts/fetch-model.sh)} || die "no model: run scripts/fetch-model.sh"
LLAMA=$(scripts/llama-server.sh) || die "scripts/llama-server.sh failed"
if [ "$SKIP_BUILD" != 1 ]; then
  cargo build --release -p gateway -p loadtest --bin gateway --bin loadtest
fi

PIDS=()
cleanup() {
  local p
  for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
  for p in "${PIDS[@]}"; do { wait "$p"; } 2>/dev/null || true; done
  PIDS=()
}
trap cleanup EXIT
trap 'cleanup; exit 130' INT TERM
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
wait_http() { # NAME PID URL LOG
  local t0=$SECONDS
  until curl -sf -o /dev/null --max-time 2 "$3"; do
    kill -0 "$2" 2>/dev/null || { tail -n 20 "$4" >&2; die "$1 exited (log: $4)"; }
    [ $((SECONDS - t0)) -ge "$START_TIMEOUT" ] && die "$1 did not answer $3 (log: $4)"
    sleep 0.5
  done
}

start_server() { # TAG; sets SERVER_URL
  local port log
  port=$(free_port)
  log=$OUT_DIR/llama-$1.log
  "$LLAMA" -m "$MODEL" --alias smollm2 --host 127.0.0.1 --port "$port" --metrics \
    -np "$SLOTS" -c "$CTX" -t 1 --cache-ram 0 >"$log" 2>&1 &
  PIDS+=($!)
  SERVER_URL=http://127.0.0.1:$port
  wait_http "llama-server $1" "$!" "$SERVER_URL/health" "$log"
}

start_gateway() { # POLICY URL URL; sets GATEWAY_URL
  local port admin log
  port=$(free_port)
  admin=$(free_port)
  log=$OUT_DIR/gateway-$1.log
  cat >"$OUT_DIR/gateway-$1.yaml" <<YAML
listen: 127.0.0.1:$port
admin_listen: 127.0.0.1:$admin
auth: {enabled: false}
policy: {type: $1}
# A busy 1-thread CPU server answers late: keep the health checker out of the measurement.
health: {probe_interval_ms: 2000, probe_timeout_ms: 600000, eject_after_failures: 1000000}
timeouts: {first_token_ms: 600000, idle_ms: 600000}
pools:
  - name: llama
    engine: llamacpp
    tokenizer: {gguf: "$MODEL"}
    upstreams: [$2, $3]
YAML
  "$BIN/gateway" --config "$OUT_DIR/gateway-$1.yaml" >"$log" 2>&1 &
  PIDS+=($!)
  GATEWAY_URL=http://127.0.0.1:$port
  ADMIN_URL=http://127.0.0.1:$admin
  wait_http "gateway $1" "$!" "$GATEWAY_URL/health" "$log"
  local t0=$SECONDS
  until curl -sf "http://127.0.0.1:$admin/admin/replicas" | python3 -c 'import json,sys; sys.exit(0 if len(json.load(sys.stdin)["replicas"]) == 2 else 1)'; do
    [ $((SECONDS - t0)) -ge "$START_TIMEOUT" ] && die "gateway $1 did not register both servers (log: $log)"
    sleep 0.5
  done
}

workload_args() {
  case $1 in
    shared-prefix) echo "--workload shared-prefix --groups 6 --prompts-per-group 5 --system-prompt-len 384 --question-len 32 --output-len 8" ;;
    multi-turn) echo "--workload multi-turn --users 6 --rounds 4 --history-len 256 --question-len 32 --output-len 8 --system-prompt-len 128" ;;
    *) die "unknown workload $1" ;;
  esac
}

echo "live-compare-llamacpp: $LLAMA, $MODEL; outputs in $OUT_DIR"
for w in $WORKLOADS; do
  for p in $POLICIES; do
    echo "== $w / $p (two fresh llama-servers, -np $SLOTS -c $CTX)"
    start_server "$w-$p-a"; a=$SERVER_URL
    start_server "$w-$p-b"; b=$SERVER_URL
    start_gateway "$p" "$a" "$b"
    # shellcheck disable=SC2046
    "$BIN/loadtest" run $(workload_args "$w") --request-rate "$RATE" --seed "$SEED" \
      --endpoint "$GATEWAY_URL" --model smollm2 --replicas 2 --policy "$p" --quiet \
      --request-timeout 300 --json "$OUT_DIR/$w-$p.json" >"$OUT_DIR/$w-$p.log" 2>&1 ||
      { tail -n 20 "$OUT_DIR/$w-$p.log" >&2; die "loadtest run $w/$p failed"; }
    # The gateway's last routing decisions, with each candidate's cost terms.
    curl -sf "$ADMIN_URL/admin/decisions" >"$OUT_DIR/$w-$p-decisions.json" || true
    cleanup
  done
done

python3 - "$OUT_DIR" "$WORKLOADS" "$POLICIES" <<'PY'
import json, os, sys
out, workloads, policies = sys.argv[1], sys.argv[2].split(), sys.argv[3].split()
print("| workload | policy | requests | TTFT p50 (ms) | TTFT p99 (ms) | engine-reported reuse | req/s |")
print("|---|---|---:|---:|---:|---:|---:|")
for w in workloads:
    for p in policies:
        s = json.load(open(os.path.join(out, f"{w}-{p}.json")))[0]
        print(f"| {w} | {p} | {s['completed']} | {s['median_ttft_ms']:.0f} | {s['p99_ttft_ms']:.0f} | "
              f"{100 * s['cache_hit_rate']:.1f}% | {s['request_throughput']:.2f} |")
PY

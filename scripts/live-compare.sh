#!/usr/bin/env bash
# Live loopback policy comparison and its simulator prediction (issue #6, second "Done when").
#
# 1. builds release `replica`, `gateway`, `loadtest` (honours CARGO_TARGET_DIR);
# 2. calibrates one fresh replica (`loadtest calibrate`) into $PROFILE (the shipped
#    configs/profiles/smollm2-cpu.json by default);
# 3. for each policy: starts 2 fresh replicas (cold caches) and a gateway `--policy P` on free
#    127.0.0.1 ports, runs the scaled-down shared-prefix workload with `loadtest run`, stops them;
# 4. simulates the same workload (same seed, same arrivals) at 2 replicas with that profile;
# 5. prints one table: live vs simulated hit rate, TTFT mean/p99, throughput.
#
#   scripts/live-compare.sh
#   POLICIES="round_robin warm cache_aware" scripts/live-compare.sh
#   SKIP_BUILD=1 CALIBRATE=0 OUT_DIR=/tmp/lc scripts/live-compare.sh   # reuse the profile
#
# Knobs (environment): POLICIES, LIVE_GROUPS, LIVE_PROMPTS, LIVE_SYS, LIVE_QUESTION, LIVE_OUTPUT,
# LIVE_RATE (requests/s, Poisson), LIVE_SEED, KV_MEMORY (per replica), REPLICA_THREADS,
# MODEL, PROFILE, CALIBRATE (1/0), SKIP_BUILD (1/0), START_TIMEOUT (s), OUT_DIR.
# Every process it starts is killed on exit; logs and JSON stay in OUT_DIR.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$ROOT/target}
BIN=$CARGO_TARGET_DIR/release

POLICIES=${POLICIES:-"round_robin warm cache_aware"}
LIVE_GROUPS=${LIVE_GROUPS:-10}
LIVE_PROMPTS=${LIVE_PROMPTS:-6}
LIVE_SYS=${LIVE_SYS:-256}
LIVE_QUESTION=${LIVE_QUESTION:-32}
LIVE_OUTPUT=${LIVE_OUTPUT:-16}
LIVE_RATE=${LIVE_RATE:-1}
LIVE_SEED=${LIVE_SEED:-1}
KV_MEMORY=${KV_MEMORY:-256MiB}
REPLICA_THREADS=${REPLICA_THREADS:-1}
PROFILE=${PROFILE:-configs/profiles/smollm2-cpu.json}
CALIBRATE=${CALIBRATE:-1}
SKIP_BUILD=${SKIP_BUILD:-0}
START_TIMEOUT=${START_TIMEOUT:-120}
OUT_DIR=${OUT_DIR:-$(mktemp -d /tmp/live-compare.XXXXXX)}
mkdir -p "$OUT_DIR"

die() {
  echo "live-compare: $*" >&2
  echo "live-compare: logs and outputs are in $OUT_DIR" >&2
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

# start_replica TAG: starts a fresh replica; sets REPLICA_URL.
start_replica() {
  local tag=$1 port log
  port=$(free_port)
  log=$OUT_DIR/replica-$tag.log
  RUST_LOG=${RUST_LOG:-info} "$BIN/replica" serve --model "$MODEL" --port "$port" \
    --kv-memory "$KV_MEMORY" --threads "$REPLICA_THREADS" >"$log" 2>&1 &
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

WORKLOAD=(--workload shared-prefix --groups "$LIVE_GROUPS" --prompts-per-group "$LIVE_PROMPTS"
  --system-prompt-len "$LIVE_SYS" --question-len "$LIVE_QUESTION" --output-len "$LIVE_OUTPUT"
  --request-rate "$LIVE_RATE" --seed "$LIVE_SEED")

echo "live-compare: outputs and logs in $OUT_DIR"
if [ "$SKIP_BUILD" != 1 ]; then
  cargo build --release -p replica -p gateway -p loadtest --bin replica --bin gateway --bin loadtest
fi
for b in replica gateway loadtest; do
  [ -x "$BIN/$b" ] || die "$BIN/$b missing (build with SKIP_BUILD=0)"
done

T_START=$SECONDS
if [ "$CALIBRATE" = 1 ]; then
  echo "== calibrate one replica -> $PROFILE"
  start_replica calibrate
  "$BIN/loadtest" calibrate --endpoint "$REPLICA_URL" --model "$MODEL_ID" --out "$PROFILE" --name smollm2-cpu \
    --prefill-tokens $((LIVE_SYS + LIVE_QUESTION)) \
    >"$OUT_DIR/calibrate.log" 2>&1 || { tail -n 20 "$OUT_DIR/calibrate.log" >&2; die "calibration failed"; }
  cleanup
fi
[ -f "$PROFILE" ] || die "profile $PROFILE missing (run with CALIBRATE=1)"

for policy in $POLICIES; do
  echo "== live: $policy (2 fresh replicas + gateway)"
  start_replica "$policy-a"
  ra=$REPLICA_URL
  start_replica "$policy-b"
  rb=$REPLICA_URL
  start_gateway "$policy" "$ra" "$rb"
  "$BIN/loadtest" run "${WORKLOAD[@]}" --endpoint "$GATEWAY_URL" --model "$MODEL_ID" --replicas 2 --policy "$policy" \
    --quiet --request-timeout 300 --json "$OUT_DIR/live-$policy.json" \
    --requests-jsonl "$OUT_DIR/live-$policy.requests.jsonl" >"$OUT_DIR/live-$policy.log" 2>&1 ||
    { tail -n 20 "$OUT_DIR/live-$policy.log" >&2; die "loadtest run against $policy failed"; }
  # The gateway's routing decisions (branch, per-replica cost terms) for diagnosis.
  curl -sf --max-time 10 "$GATEWAY_ADMIN/admin/decisions?limit=256" >"$OUT_DIR/decisions-$policy.json" || true
  cleanup
done
T_LIVE=$((SECONDS - T_START))

echo "== simulate the same workload at 2 replicas with $PROFILE"
SIM_POLICIES=()
for policy in $POLICIES; do SIM_POLICIES+=(--policy "$policy"); done
"$BIN/loadtest" simulate "${WORKLOAD[@]}" --replicas 2 --profile "$PROFILE" "${SIM_POLICIES[@]}" \
  --load-staleness-ms 200 --quiet --json "$OUT_DIR/sim.json" \
  --requests-jsonl "$OUT_DIR/sim.requests.jsonl" >"$OUT_DIR/sim.log" 2>&1 ||
  { tail -n 20 "$OUT_DIR/sim.log" >&2; die "loadtest simulate failed"; }

echo
echo "workload: shared-prefix ${LIVE_GROUPS}x${LIVE_PROMPTS}, system ${LIVE_SYS} + question ${LIVE_QUESTION} tokens," \
  "output ${LIVE_OUTPUT}, Poisson ${LIVE_RATE} req/s, seed ${LIVE_SEED}; 2 replicas (--threads ${REPLICA_THREADS}," \
  "--kv-memory ${KV_MEMORY}); profile ${PROFILE}; live phase ${T_LIVE}s"
python3 - "$OUT_DIR" $POLICIES <<'PY'
import json, sys, os
out, policies = sys.argv[1], sys.argv[2:]
sim = {o["policy"]: o for o in json.load(open(os.path.join(out, "sim.json")))}
hdr = ("policy", "live hit %", "sim hit %", "diff pts", "live TTFT mean", "live TTFT p99",
       "sim TTFT mean", "sim TTFT p99", "live req/s", "sim req/s", "live errors", "live share")
rows, worst = [], 0.0
for p in policies:
    live = json.load(open(os.path.join(out, f"live-{p}.json")))[0]
    s = sim[p]
    lh, sh = 100 * live["cache_hit_rate"], 100 * s["cache_hit_rate"]
    worst = max(worst, abs(lh - sh))
    errs = sum(live.get("errors", {}).values()) if isinstance(live.get("errors"), dict) else live.get("errors", 0)
    share = live.get("replica_share", {})
    share = "/".join(f"{v:.2f}" for _, v in sorted(share.items())) if isinstance(share, dict) else str(share)
    rows.append((p, f"{lh:.1f}", f"{sh:.1f}", f"{lh - sh:+.1f}",
                 f"{live['mean_ttft_ms']:.0f}", f"{live['p99_ttft_ms']:.0f}",
                 f"{s['mean_ttft_ms']:.0f}", f"{s['p99_ttft_ms']:.0f}",
                 f"{live['request_throughput']:.2f}", f"{s['request_throughput']:.2f}",
                 str(errs), share))
print("| " + " | ".join(hdr) + " |")
print("|" + "|".join("---" if i == 0 else "---:" for i in range(len(hdr))) + "|")
for r in rows:
    print("| " + " | ".join(r) + " |")
print(f"\nTTFT in ms. Largest |live - sim| hit-rate gap: {worst:.1f} points "
      f"({'within' if worst <= 10 else 'NOT within'} 10 points).")
print("\nRouting branches (live from the gateway's /admin/decisions, sim from route_branches):")
for p in policies:
    live_b = {}
    try:
        for d in json.load(open(os.path.join(out, f"decisions-{p}.json"))):
            b = d["decision"]["explanation"]["branch"]
            live_b[b] = live_b.get(b, 0) + 1
    except (OSError, ValueError, KeyError, TypeError):
        live_b = {"unavailable": 0}
    fmt = lambda m: ", ".join(f"{k} {v}" for k, v in sorted(m.items())) or "-"
    print(f"  {p}: live {fmt(live_b)}; sim {fmt(sim[p].get('route_branches', {}))}")
PY
echo "live-compare: outputs and logs in $OUT_DIR"

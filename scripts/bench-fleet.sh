#!/usr/bin/env bash
# Shared state's cost, one run on this machine: the same gateway config with tenant limits
# in memory and in Redis (a local redis-server), in front of the same fixed-reply upstream,
# driven by wrk in interleaved rounds; then the share of requests a Redis restart sends
# through the degraded fallback. Writes the `## fleet` section of BENCH_OUT (default
# $CARGO_TARGET_DIR/bench-fleet.md; BENCHMARKS.md records it).
#
#   scripts/bench-fleet.sh               # DURATION=10 ROUNDS=3 PROFILE=release
#   WARMPATH_BENCH_DEPS=1 scripts/ci-deps.sh   # installs wrk (and redis-server)
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)
. scripts/lib/gateway-bench-common.sh
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$ROOT/target}
PROFILE=${PROFILE:-release}
DURATION=${DURATION:-10}
ROUNDS=${ROUNDS:-3}
BENCH_OUT=${BENCH_OUT:-$CARGO_TARGET_DIR/bench-fleet.md}
BENCH_TOKENIZER=${BENCH_TOKENIZER:-bytes}
for tool in wrk redis-server redis-cli; do
  command -v $tool >/dev/null || { echo "$tool missing: WARMPATH_BENCH_DEPS=1 scripts/ci-deps.sh" >&2; exit 1; }
done
cargo build --profile "$PROFILE" -p gateway --bin gateway --example fixed_upstream
BIN=$CARGO_TARGET_DIR/$([ "$PROFILE" = dev ] && echo debug || echo "$PROFILE")
WORK=$(mktemp -d)
PIDS=()
cleanup() {
  # The Redis started again mid-run was started in a subshell: its pid is in a file.
  [ -f "$WORK/redis.pid" ] && kill -KILL "$(cat "$WORK/redis.pid")" 2>/dev/null
  for p in "${PIDS[@]}"; do kill -KILL "$p" 2>/dev/null || true; wait "$p" 2>/dev/null || true; done
  rm -rf "$WORK"
}
trap cleanup EXIT

UP=19200; GM=19201; AM=19202; GR=19203; AR=19204; RP=19205; REP=19206
SPEC_ARGS=()
tokenizer_spec "$WORK/spec.json" "$BIN" "$PROFILE" $REP
[ -s "$WORK/spec.json" ] && SPEC_ARGS=("$WORK/spec.json")
"$BIN/examples/fixed_upstream" 127.0.0.1:$UP 1 "${SPEC_ARGS[@]}" >/dev/null 2>&1 & PIDS+=($!)
start_redis() {
  redis-server --bind 127.0.0.1 --port $RP --save "" --appendonly no >"$WORK/redis.log" 2>&1 & REDIS_PID=$!; PIDS+=($REDIS_PID)
  echo $REDIS_PID > "$WORK/redis.pid"
  for _ in $(seq 100); do redis-cli -p $RP ping >/dev/null 2>&1 && return; sleep 0.05; done
}
start_redis
write_gateway_yaml "$WORK/memory.yaml" $GM $AM $UP 1
write_gateway_yaml "$WORK/redis.yaml" $GR $AR $UP 1
echo "state: {backend: redis, url: 'redis://127.0.0.1:$RP', gateway_count: 3}" >> "$WORK/redis.yaml"
RUST_LOG=warn "$BIN/gateway" --config "$WORK/memory.yaml" >/dev/null 2>"$WORK/memory.log" & GM_PID=$!; PIDS+=($GM_PID)
RUST_LOG=warn "$BIN/gateway" --config "$WORK/redis.yaml" >/dev/null 2>"$WORK/redis-gw.log" & GR_PID=$!; PIDS+=($GR_PID)
for _ in $(seq 100); do
  curl -sf "http://127.0.0.1:$AM/admin/replicas" | grep -q '"id"' \
    && curl -sf "http://127.0.0.1:$AR/metrics" | grep -q '^warmpath_gateway_state_degraded 0' && break
  sleep 0.2
done
write_short_lua "$WORK/short.lua"

# wrk CONNS PORT -> "rps p50_us"
run_wrk() {
  local out
  out=$(wrk -t1 -c"$1" -d"${DURATION}s" --latency -s "$WORK/short.lua" "http://127.0.0.1:$2/v1/chat/completions")
  echo "$out" >> "$WORK/wrk.log"
  local errs
  errs=$(echo "$out" | awk '/Non-2xx/ {print $5}')
  [ -z "$errs" ] || { echo "non-2xx responses on port $2: $errs" >&2; exit 1; }
  echo "$(echo "$out" | awk '/Requests\/sec/ {print $2}') $(echo "$out" | awk '$1=="50%" {v=$2; if (v ~ /us$/) {sub("us","",v); print v} else if (v ~ /ms$/) {sub("ms","",v); print v*1000} else {sub("s","",v); print v*1000000}}')"
}
: > "$WORK/rounds.txt"
for round in $(seq "$ROUNDS"); do
  # Memory first on odd rounds, Redis first on even ones.
  if [ $((round % 2)) = 1 ]; then order="M R"; else order="R M"; fi
  echo "$round D1 $(run_wrk 1 $UP)" >> "$WORK/rounds.txt"
  for s in $order; do
    port=$([ "$s" = M ] && echo $GM || echo $GR)
    echo "$round ${s}8 $(run_wrk 8 "$port")" >> "$WORK/rounds.txt"
    echo "$round ${s}1 $(run_wrk 1 "$port")" >> "$WORK/rounds.txt"
  done
done
eval "$(python3 -c '
import statistics, sys
rows = {}
for line in open(sys.argv[1]):
    _, key, rps, p50 = line.split()
    rows.setdefault(key, []).append((float(rps), float(p50)))
for key, vs in rows.items():
    print(f"{key}_RPS={statistics.median(v[0] for v in vs):.1f} {key}_P50={statistics.median(v[1] for v in vs):.1f}")
' "$WORK/rounds.txt")"
calc() { python3 -c "print(round($1, 3))"; }
M_ADD=$(calc "$M1_P50 - $D1_P50"); R_ADD=$(calc "$R1_P50 - $D1_P50")

# A Redis restart under load: c=8 for DURATION s; Redis is killed after 3 s and started
# again (empty) 2 s later. Degraded share = fallback admissions / requests in the run.
metric() { curl -s "http://127.0.0.1:$AR/metrics" | awk -v m="$1" '$1==m {print $2}'; }
f0=$(metric warmpath_gateway_state_fallback_admissions_total)
out=$( (sleep 3; kill -KILL $REDIS_PID; sleep 2; start_redis) & wrk -t1 -c8 -d"${DURATION}s" -s "$WORK/short.lua" "http://127.0.0.1:$GR/v1/chat/completions")
sleep 1
f1=$(metric warmpath_gateway_state_fallback_admissions_total)
N=$(echo "$out" | awk '/requests in/ {print $1}')
NON2XX=$(echo "$out" | awk '/Non-2xx/ {print $5}'); NON2XX=${NON2XX:-0}
FALLBACK=$(calc "$f1 - $f0")
SHARE=$(calc "($f1 - $f0) / max($N, 1)")
RECOVERED=$(metric warmpath_gateway_state_degraded)

cat > "$BENCH_OUT" <<MD
## fleet

$(date -u +%Y-%m-%d), $(nproc) cores, \`scripts/bench-fleet.sh\` (PROFILE=$PROFILE, DURATION=${DURATION}s, ROUNDS=$ROUNDS, median of rounds; one gateway thread, tokenizer: ${TOKENIZER_NAME:-bytes}); the same gateway config, tenant limits in memory or in a local redis-server.

| state | req/s c=8 | p50 c=1 (µs) | added p50 c=1 (µs) |
|---|---|---|---|
| memory | $M8_RPS | $M1_P50 | $M_ADD |
| redis | $R8_RPS | $R1_P50 | $R_ADD |
| direct to upstream | | $D1_P50 | |

Redis / memory: req/s $(calc "$R8_RPS / $M8_RPS"), added p50 $(calc "$R_ADD / max($M_ADD, 0.001)").

Redis killed 3 s into a ${DURATION} s run at c=8 and started again, empty, 2 s later: $N requests, $FALLBACK admitted by the degraded fallback (share $SHARE), $NON2XX non-2xx; state_degraded after the run: $RECOVERED.

Rounds (round, run, req/s, p50 µs):

\`\`\`
$(cat "$WORK/rounds.txt")
\`\`\`
MD
cat "$BENCH_OUT"

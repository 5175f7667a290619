#!/usr/bin/env bash
# Instructions per proxied request (callgrind), for the gateway and the bare Pingora
# passthrough, each in front of the same fixed-reply upstream with the short chat body of
# scripts/bench-gateway.sh. Unlike req/s on a shared 2-core VM, an instruction count does not
# move with machine load, so it tracks the gateway's own cost from change to change.
# (callgrind runs the CPU without SHA extensions, so the gateway's API-key hash counts about
# 3,000 instructions more here than it costs on a CPU with SHA-NI.)
#
#   scripts/gateway-instructions.sh        # needs valgrind and wrk (apt-get install valgrind wrk)
#   BENCH_SPEC=spec.json scripts/gateway-instructions.sh   # a tokenizer spec saved from
#       `curl replica:PORT/v1/replica/tokenizer` (SmolLM2's, as scripts/bench-gateway.sh uses);
#       without it the upstream publishes the byte-level fixture tokenizer
#
#   BODY=long scripts/gateway-instructions.sh   # the long body (25 KB shared system prompt)
#   BODY=stream scripts/gateway-instructions.sh # the short body with "stream":true (SSE reply)
#   KEEP_CG=DIR scripts/gateway-instructions.sh # also keeps each proxy's callgrind profile
#       as DIR/callgrind.{gateway,passthrough}, for callgrind_annotate
#   BIN_DIR=DIR scripts/gateway-instructions.sh # binaries built before (DIR/gateway,
#       DIR/examples/{passthrough,fixed_upstream}): counts another build without building
#
# Prints one line per proxy: requests measured, instructions per request, allocations per
# request; then the ratio. Counters are zeroed after a warm-up, so start-up is not counted.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)
. scripts/lib/gateway-bench-common.sh
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$ROOT/target}
DURATION=${DURATION:-8}
for tool in valgrind callgrind_control callgrind_annotate wrk; do
  command -v $tool >/dev/null || { echo "$tool missing: apt-get install valgrind wrk" >&2; exit 1; }
done
# BIN_DIR: binaries built earlier (gateway, examples/passthrough, examples/fixed_upstream),
# e.g. another commit's, to count before and after a change; nothing is built then.
if [ -n "${BIN_DIR:-}" ]; then
  BIN=$BIN_DIR
else
  cargo build --release -p gateway --bin gateway --example passthrough --example fixed_upstream
  BIN=$CARGO_TARGET_DIR/release
fi
WORK=$(mktemp -d)
PIDS=()
cleanup() {
  for p in "${PIDS[@]}"; do kill -KILL "$p" 2>/dev/null || true; done
  rm -rf "$WORK"
}
trap cleanup EXIT
UP=19200; PT=19201; GW=19203; ADM=19204
SPEC_ARGS=()
[ -n "${BENCH_SPEC:-}" ] && SPEC_ARGS=("$BENCH_SPEC")
"$BIN/examples/fixed_upstream" 127.0.0.1:$UP 1 "${SPEC_ARGS[@]}" >/dev/null 2>&1 & PIDS+=($!)
write_gateway_yaml "$WORK/gateway.yaml" $GW $ADM $UP 1
write_short_lua "$WORK/short.lua"
write_long_lua "$WORK/long.lua"
write_stream_lua "$WORK/stream.lua"
BODY=${BODY:-short}
case "$BODY" in short | long | stream) ;; *) echo "BODY must be short, long or stream, not '$BODY'" >&2; exit 1 ;; esac

# measure NAME PORT CMD...: runs CMD under callgrind, warms up, counts DURATION seconds of
# wrk c=8 traffic; prints "NAME requests instructions/request allocations/request".
measure() {
  local name=$1 port=$2; shift 2
  valgrind --tool=callgrind --callgrind-out-file="$WORK/cg.$name" "$@" >/dev/null 2>"$WORK/$name.log" &
  local pid=$!; PIDS+=($pid)
  for _ in $(seq 150); do
    curl -sf -o /dev/null -H "Authorization: Bearer $KEY" -H 'Content-Type: application/json' \
      -d "$SHORT" "http://127.0.0.1:$port/v1/chat/completions" && break
    sleep 0.4
  done
  wrk -t1 -c8 -d2s -s "$WORK/$BODY.lua" "http://127.0.0.1:$port/v1/chat/completions" >/dev/null
  callgrind_control -z "$pid" >"$WORK/$name.ctl" 2>&1 || { echo "callgrind_control -z failed: $(cat "$WORK/$name.ctl")" >&2; exit 1; }
  local n
  n=$(wrk -t1 -c8 -d"${DURATION}s" -s "$WORK/$BODY.lua" "http://127.0.0.1:$port/v1/chat/completions" |
    awk '/requests in/ {print $1}')
  callgrind_control -d "$pid" >/dev/null
  kill "$pid"; wait "$pid" 2>/dev/null || true
  local file total allocs
  file=$(ls -t "$WORK"/cg."$name".* | head -1)
  [ -z "${KEEP_CG:-}" ] || cp "$file" "$KEEP_CG/callgrind.$name"
  total=$(callgrind_annotate "$file" | awk '/PROGRAM TOTALS/ {gsub(",", "", $1); print $1}')
  # Allocations: calls into mimalloc's entry points (every Rust allocation goes through
  # mi_malloc_aligned or mi_zalloc_aligned), summed over the callers listed above each entry
  # in the call tree. (Counting the callers of __rust_alloc misses the allocations whose
  # shim the compiler inlined: it undercounted the passthrough, 42 a request against 73.5.)
  allocs=$(callgrind_annotate --threshold=100 --inclusive=yes --tree=caller "$file" 2>/dev/null | python3 -c '
import re, sys
block, total = [], 0
for line in sys.stdin:
    if not line.strip():
        block = []
    elif "* " in line and re.search(r":mi_(malloc|zalloc)_aligned( |$)", line):
        total += sum(int(m.replace(",", "")) for l in block for m in re.findall(r"\(([\d,]+)x\)", l))
        block = []
    else:
        block.append(line)
print(total)
')
  echo "$name $n $((total / n)) $(python3 -c "print(round($allocs / $n, 1))")"
}

export RUST_LOG=warn
G=$(measure gateway $GW "$BIN/gateway" --config "$WORK/gateway.yaml")
P=$(measure passthrough $PT "$BIN/examples/passthrough" 127.0.0.1:$PT 127.0.0.1:$UP 1)
echo "$BODY body: proxy requests instructions/request allocations/request"
echo "$G"
echo "$P"
python3 -c "
g, p = '$G'.split(), '$P'.split()
print(f'gateway / passthrough instructions per request: {int(g[2]) / int(p[2]):.3f}')
print(f'gateway added instructions per request: {int(g[2]) - int(p[2])}')"

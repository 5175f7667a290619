#!/usr/bin/env bash
# Profile-guided (PGO) release build of the gateway, and of the benchmark's bare Pingora
# passthrough baseline, which is trained and built the same way so that
# `PGO=1 scripts/bench-gateway.sh` compares like with like.
#
#   scripts/build-pgo.sh                 # needs wrk: WARMPATH_BENCH_DEPS=1 scripts/ci-deps.sh
#   BENCH_SPEC=spec.json scripts/build-pgo.sh   # a saved tokenizer spec: no replica build
#
# 1. builds both with LLVM instrumentation (-Cprofile-generate), in their own target dir;
# 2. trains them (the passthrough twice: as is, and on the gateway's one-send upstream
#    connector): each proxies TRAIN_SECONDS (default 8) of wrk c=8 traffic per body (the
#    short chat and the 25 KB long chat of scripts/bench-gateway.sh, and the short chat
#    streamed, answered in SSE) to the fixed-reply upstream, which publishes SmolLM2's
#    tokenizer, so the gateway tokenizes, hashes, routes, authenticates, follows the stream
#    and settles limits as it does in front of real replicas;
# 3. merges the profiles with llvm-profdata (rustup's llvm-tools component, added if missing)
#    and rebuilds with -Cprofile-use. The profile covers every crate, Pingora included.
#
# Prints the directory holding `gateway` and `examples/passthrough`:
# $CARGO_TARGET_DIR/pgo/use/HOST/release (HOST: `rustc -vV`). Run it again after changing
# the code: a stale profile still builds, but LLVM drops the counts of functions that changed
# ("function control flow change detected"); cargo rebuilds only the crates that changed.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)
. scripts/lib/gateway-bench-common.sh
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$ROOT/target}
TRAIN_SECONDS=${TRAIN_SECONDS:-8}
PGO_DIR=$CARGO_TARGET_DIR/pgo
say() { printf 'build-pgo: %s\n' "$*" >&2; }

command -v wrk >/dev/null || { say "wrk missing: WARMPATH_BENCH_DEPS=1 scripts/ci-deps.sh"; exit 1; }
HOST=$(rustc -vV | awk '/^host:/ {print $2}')
PROFDATA=$(rustc --print sysroot)/lib/rustlib/$HOST/bin/llvm-profdata
if [ ! -x "$PROFDATA" ]; then
  say "adding rustup's llvm-tools component (for llvm-profdata)"
  rustup component add llvm-tools >&2 || {
    say "llvm-profdata missing and 'rustup component add llvm-tools' failed: install llvm-tools for $(rustc --version)"
    exit 1
  }
fi

# The training upstream is an ordinary release build: only the proxies are profiled.
cargo build --release -p gateway --example fixed_upstream >&2
rm -rf "$PGO_DIR/raw"
mkdir -p "$PGO_DIR/raw"
say "building the instrumented gateway and passthrough"
# --target keeps RUSTFLAGS off build scripts and proc macros, which would otherwise be
# instrumented too and write profiles of the build itself.
RUSTFLAGS="${RUSTFLAGS:-} -Cprofile-generate=$PGO_DIR/raw" CARGO_TARGET_DIR=$PGO_DIR/gen \
  cargo build --release --target "$HOST" -p gateway --bin gateway --example passthrough >&2

WORK=$(mktemp -d)
PIDS=()
cleanup() {
  for p in "${PIDS[@]}"; do kill -KILL "$p" 2>/dev/null || true; wait "$p" 2>/dev/null || true; done
  rm -rf "$WORK"
}
trap cleanup EXIT
UP=19300; PT=19301; GW=19303; ADM=19304; REP=19305; PC=19306
SPEC_ARGS=()
tokenizer_spec "$WORK/spec.json" "$CARGO_TARGET_DIR/release" release $REP
[ -s "$WORK/spec.json" ] && SPEC_ARGS=("$WORK/spec.json")
"$CARGO_TARGET_DIR/release/examples/fixed_upstream" 127.0.0.1:$UP 1 "${SPEC_ARGS[@]}" >/dev/null 2>&1 & PIDS+=($!)
write_gateway_yaml "$WORK/gateway.yaml" $GW $ADM $UP 1
write_short_lua "$WORK/short.lua"
write_long_lua "$WORK/long.lua"
write_stream_lua "$WORK/stream.lua"
GEN=$PGO_DIR/gen/$HOST/release
LLVM_PROFILE_FILE="$PGO_DIR/raw/gateway-%p-%m.profraw" RUST_LOG=warn \
  "$GEN/gateway" --config "$WORK/gateway.yaml" >/dev/null 2>"$WORK/gateway.log" & GW_PID=$!
LLVM_PROFILE_FILE="$PGO_DIR/raw/passthrough-%p-%m.profraw" \
  "$GEN/examples/passthrough" 127.0.0.1:$PT 127.0.0.1:$UP 1 >/dev/null 2>&1 & PT_PID=$!
LLVM_PROFILE_FILE="$PGO_DIR/raw/passthrough-%p-%m.profraw" \
  "$GEN/examples/passthrough" 127.0.0.1:$PC 127.0.0.1:$UP 1 one-send >/dev/null 2>&1 & PC_PID=$!
PIDS+=($GW_PID $PT_PID $PC_PID)
for port in $GW $PT $PC; do
  ok=""
  for _ in $(seq 150); do
    code=$(curl -s -o /dev/null -w '%{http_code}' -H "Authorization: Bearer $KEY" \
      -H 'Content-Type: application/json' -d "$SHORT" "http://127.0.0.1:$port/v1/chat/completions" || true)
    [ "$code" = 200 ] && ok=1 && break
    sleep 0.2
  done
  [ -n "$ok" ] || { say "port $port never answered 200"; cat "$WORK/gateway.log" >&2; exit 1; }
done
for port in $GW $PT $PC; do
  for body in short long stream; do
    say "training on port $port, $body body, ${TRAIN_SECONDS}s"
    wrk -t1 -c8 -d"${TRAIN_SECONDS}s" -s "$WORK/$body.lua" "http://127.0.0.1:$port/v1/chat/completions" >/dev/null
  done
done
# The counters are written when a process exits; SIGINT is Pingora's fast shutdown.
kill -INT "$GW_PID" "$PT_PID" "$PC_PID"
wait "$GW_PID" "$PT_PID" "$PC_PID" 2>/dev/null || true
ls "$PGO_DIR"/raw/gateway-*.profraw "$PGO_DIR"/raw/passthrough-*.profraw >/dev/null 2>&1 \
  || { say "no profile was written (did the proxies exit cleanly?)"; exit 1; }
"$PROFDATA" merge -o "$PGO_DIR/merged.profdata" "$PGO_DIR"/raw/*.profraw

say "building with the profile"
RUSTFLAGS="${RUSTFLAGS:-} -Cprofile-use=$PGO_DIR/merged.profdata" CARGO_TARGET_DIR=$PGO_DIR/use \
  cargo build --release --target "$HOST" -p gateway --bin gateway --example passthrough >&2
echo "$PGO_DIR/use/$HOST/release"

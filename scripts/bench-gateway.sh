#!/usr/bin/env bash
# Gateway overhead benchmark, one run on this machine: the gateway (auth, limits,
# tokenize, hash, route on), a bare Pingora passthrough, the same passthrough on the
# gateway's one-send upstream connector, and nginx (1 worker), each in front of the same
# fixed-reply OpenAI upstream, driven by wrk. Writes the `## gateway` section
# of BENCH_OUT (default $CARGO_TARGET_DIR/bench-gateway.md; BENCHMARKS.md section 4 records it).
#
#   scripts/bench-gateway.sh            # DURATION=10 PROFILE=release by default
#   WARMPATH_BENCH_DEPS=1 scripts/ci-deps.sh   # installs wrk and nginx
#   BENCH_SPEC=spec.json scripts/bench-gateway.sh  # a saved tokenizer spec: no replica build
#   PGO=1 scripts/bench-gateway.sh      # gateway and passthrough both from scripts/build-pgo.sh;
#                                       # writes the `## gateway, PGO build` section instead
#   PGO=1 PGO_BIN=DIR scripts/bench-gateway.sh   # reuse what build-pgo.sh printed before
#   BASELINE_GATEWAY=FILE scripts/bench-gateway.sh  # also runs another gateway binary (an
#                                       # earlier commit's build) in every round, interleaved,
#                                       # and reports this gateway against it (before/after)
#
# The upstream publishes SmolLM2's tokenizer (taken from a short-lived `replica serve` on
# the model that scripts/fetch-model.sh provides), so the gateway tokenizes as it would in
# front of real replicas; BENCH_TOKENIZER=bytes uses the byte-level fixture instead.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)
. scripts/lib/gateway-bench-common.sh
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$ROOT/target}
PROFILE=${PROFILE:-release}
DURATION=${DURATION:-10}
THREADS=${THREADS:-1}
BENCH_OUT=${BENCH_OUT:-$CARGO_TARGET_DIR/bench-gateway.md}
BENCH_TOKENIZER=${BENCH_TOKENIZER:-smollm2}
for tool in wrk nginx; do
  command -v $tool >/dev/null || { echo "$tool missing: WARMPATH_BENCH_DEPS=1 scripts/ci-deps.sh" >&2; exit 1; }
done
cargo build --profile "$PROFILE" -p gateway --bin gateway --example passthrough --example fixed_upstream --example route_bench
BIN=$CARGO_TARGET_DIR/$([ "$PROFILE" = dev ] && echo debug || echo "$PROFILE")
# The two Pingora proxies under test; nginx, the upstream and route_bench are the same either way.
PROXY_BIN=$BIN
BUILD="PROFILE=$PROFILE"
TITLE="gateway"
if [ "${PGO:-0}" = 1 ]; then
  # PGO_BIN: a directory scripts/build-pgo.sh printed earlier, for the same code.
  PROXY_BIN=${PGO_BIN:-$(scripts/build-pgo.sh)}
  BUILD="PGO build from scripts/build-pgo.sh, gateway and passthrough alike"
  TITLE="gateway, PGO build"
fi
WORK=$(mktemp -d)
PIDS=()
cleanup() {
  # nginx's master stops its worker on TERM; a KILLed master would leave the worker behind.
  [ -n "${NG_MASTER:-}" ] && kill -TERM "$NG_MASTER" 2>/dev/null && sleep 0.5
  for p in "${PIDS[@]}"; do kill -KILL "$p" 2>/dev/null || true; wait "$p" 2>/dev/null || true; done
  rm -rf "$WORK"
}
trap cleanup EXIT

UP=19100; PT=19101; NG=19102; GW=19103; ADM=19104; REP=19105; PC=19106; GB=19107; ADMB=19108
SPEC_ARGS=()
tokenizer_spec "$WORK/spec.json" "$BIN" "$PROFILE" $REP
[ -s "$WORK/spec.json" ] && SPEC_ARGS=("$WORK/spec.json")
"$BIN/examples/fixed_upstream" 127.0.0.1:$UP "$THREADS" "${SPEC_ARGS[@]}" >/dev/null 2>&1 & UP_PID=$!; PIDS+=($UP_PID)
"$PROXY_BIN/examples/passthrough" 127.0.0.1:$PT 127.0.0.1:$UP "$THREADS" >/dev/null 2>&1 & PT_PID=$!; PIDS+=($PT_PID)
"$PROXY_BIN/examples/passthrough" 127.0.0.1:$PC 127.0.0.1:$UP "$THREADS" one-send >/dev/null 2>&1 & PC_PID=$!; PIDS+=($PC_PID)
mkdir -p "$WORK/nginx/logs"
cat > "$WORK/nginx/nginx.conf" <<NGINX
worker_processes 1;
daemon off;
error_log $WORK/nginx/logs/error.log warn;
pid $WORK/nginx/nginx.pid;
events { worker_connections 1024; }
http {
  access_log off;
  client_body_buffer_size 128k;
  client_body_temp_path $WORK/nginx/body;
  proxy_temp_path $WORK/nginx/proxy;
  upstream fixed { server 127.0.0.1:$UP; keepalive 64; }
  server {
    listen 127.0.0.1:$NG;
    location / { proxy_pass http://fixed; proxy_http_version 1.1; proxy_set_header Connection ""; }
  }
}
NGINX
nginx -p "$WORK/nginx" -c "$WORK/nginx/nginx.conf" & NG_MASTER=$!; PIDS+=($NG_MASTER)
write_gateway_yaml "$WORK/gateway.yaml" $GW $ADM $UP "$THREADS"
RUST_LOG=warn "$PROXY_BIN/gateway" --config "$WORK/gateway.yaml" >/dev/null 2>"$WORK/gateway.log" & GW_PID=$!; PIDS+=($GW_PID)
BASELINE=${BASELINE_GATEWAY:-}
if [ -n "$BASELINE" ]; then
  [ -x "$BASELINE" ] || { echo "BASELINE_GATEWAY=$BASELINE: not an executable" >&2; exit 1; }
  write_gateway_yaml "$WORK/baseline.yaml" $GB $ADMB $UP "$THREADS"
  RUST_LOG=warn "$BASELINE" --config "$WORK/baseline.yaml" >/dev/null 2>"$WORK/baseline.log" & GB_PID=$!; PIDS+=($GB_PID)
fi
for i in $(seq 100); do
  if curl -sf "http://127.0.0.1:$ADM/admin/replicas" | grep -q '"id"' && curl -sf http://127.0.0.1:$PT/ >/dev/null 2>&1 \
    && curl -sf http://127.0.0.1:$PC/ >/dev/null 2>&1 \
    && { [ -z "$BASELINE" ] || curl -sf "http://127.0.0.1:$ADMB/admin/replicas" | grep -q '"id"'; }; then break; fi
  sleep 0.2
done

write_short_lua "$WORK/short.lua"
write_long_lua "$WORK/long.lua"

# CPU time (user + system, clock ticks) a process has used so far.
cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }

# wrk CONNS SCRIPT PORT PID -> "rps p50_us cpu_us_per_request" (CPU of the process PID,
# which serves PORT, per request: robust to other load on the machine, unlike req/s).
run_wrk() {
  local out t0 t1
  t0=$(cpu_ticks "$4")
  out=$(wrk -t1 -c"$1" -d"${DURATION}s" --latency -s "$WORK/$2" "http://127.0.0.1:$3/v1/chat/completions")
  t1=$(cpu_ticks "$4")
  echo "$out" >> "$WORK/wrk.log"
  local rps p50
  rps=$(echo "$out" | awk '/Requests\/sec/ {print $2}')
  p50=$(echo "$out" | awk '$1=="50%" {v=$2; if (v ~ /us$/) {sub("us","",v); print v} else if (v ~ /ms$/) {sub("ms","",v); print v*1000} else {sub("s","",v); print v*1000000}}')
  local errs
  errs=$(echo "$out" | awk '/Non-2xx/ {print $5}')
  [ -z "$errs" ] || { echo "non-2xx responses on port $3: $errs" >&2; echo "$out" >&2; exit 1; }
  local n cpu
  n=$(echo "$out" | awk '/requests in/ {print $1}')
  cpu=$(python3 -c "print(round(($t1 - $t0) / $(getconf CLK_TCK) * 1e6 / max($n, 1), 1))")
  echo "$rps $p50 $cpu"
}

# Sanity: every front answers 200.
for p in $PT $PC $NG $GW ${BASELINE:+$GB}; do
  code=$(curl -s -o /dev/null -w '%{http_code}' -H "Authorization: Bearer $KEY" -H 'Content-Type: application/json' -d "$SHORT" http://127.0.0.1:$p/v1/chat/completions)
  [ "$code" = 200 ] || { echo "port $p answered $code" >&2; cat "$WORK/gateway.log" >&2; exit 1; }
done

NG_PID=$(pgrep -P "$NG_MASTER" | head -1)
# ROUNDS rounds; in each, every system runs once per measurement, back to back, so load
# from elsewhere on the machine hits all of them alike. Each figure is the median of its
# rounds; every round is listed under the tables.
ROUNDS=${ROUNDS:-3}
: > "$WORK/rounds.txt"
# measures ROUND: this round's measurements, in order. With a baseline gateway, each of its
# runs sits next to the same run of this gateway, first on even rounds and second on odd
# ones, so neither build always follows the same neighbour (caches, the run before it).
measures() {
  local g8="G8 8 short.lua $GW $GW_PID" g1="G1 1 short.lua $GW $GW_PID" gl="GL 8 long.lua $GW $GW_PID"
  if [ -n "$BASELINE" ]; then
    local b8="B8 8 short.lua $GB $GB_PID" b1="B1 1 short.lua $GB $GB_PID" bl="BL 8 long.lua $GB $GB_PID"
    if [ $(($1 % 2)) = 0 ]; then
      g8="$b8|$g8"; g1="$b1|$g1"; gl="$bl|$gl"
    else
      g8="$g8|$b8"; g1="$g1|$b1"; gl="$gl|$bl"
    fi
  fi
  echo "D1 1 short.lua $UP $UP_PID|$g8|P8 8 short.lua $PT $PT_PID|C8 8 short.lua $PC $PC_PID|N8 8 short.lua $NG $NG_PID|$g1|P1 1 short.lua $PT $PT_PID|C1 1 short.lua $PC $PC_PID|N1 1 short.lua $NG $NG_PID|$gl|PL 8 long.lua $PT $PT_PID|CL 8 long.lua $PC $PC_PID|NL 8 long.lua $NG $NG_PID"
}
for round in $(seq "$ROUNDS"); do
  IFS='|' read -r -a MEASURES <<< "$(measures "$round")"
  for m in "${MEASURES[@]}"; do
    set -- $m
    echo "$round $1 $(run_wrk "$2" "$3" "$4" "$5")" >> "$WORK/rounds.txt"
  done
done
# KEY_RPS, KEY_P50, KEY_CPU: medians over the rounds.
MEDIANS=$(python3 -c '
import statistics, sys
rows = {}
for line in open(sys.argv[1]):
    _, key, *vals = line.split()
    rows.setdefault(key, []).append([float(v) for v in vals])
for key, vs in rows.items():
    for i, name in enumerate(["RPS", "P50", "CPU"]):
        print(f"{key}_{name}={statistics.median(v[i] for v in vs):.2f}")
' "$WORK/rounds.txt")
eval "$MEDIANS"
ROUTE=$("$BIN/examples/route_bench" 8000 300 "${SPEC_ARGS[@]}")
DEC=$(curl -s "http://127.0.0.1:$ADM/admin/decisions?limit=1")
LONG_TOKENS=$(echo "$DEC" | python3 -c 'import json,sys; d=json.load(sys.stdin); print(d[-1]["prompt_tokens"] if d else 0)')

calc() { python3 -c "print(round($1, 3))"; }
G_ADD=$(calc "$G1_P50 - $D1_P50"); P_ADD=$(calc "$P1_P50 - $D1_P50"); N_ADD=$(calc "$N1_P50 - $D1_P50")
C_ADD=$(calc "$C1_P50 - $D1_P50")
RATIO8=$(calc "$G8_RPS / $P8_RPS"); RATIO_ADD=$(calc "($G1_P50 - $D1_P50) / max($P1_P50 - $D1_P50, 0.001)")
RATIOL=$(calc "$GL_RPS / $PL_RPS")
# Like for like: the gateway against the passthrough on the same one-send connector.
RATIO8C=$(calc "$G8_RPS / $C8_RPS"); RATIO_ADDC=$(calc "($G1_P50 - $D1_P50) / max($C1_P50 - $D1_P50, 0.001)")
RATIOLC=$(calc "$GL_RPS / $CL_RPS"); CPU8C=$(calc "$C8_CPU / max($G8_CPU, 0.001)")
CPU8=$(calc "$P8_CPU / max($G8_CPU, 0.001)"); CPUL=$(calc "$PL_CPU / max($GL_CPU, 0.001)")
BASELINE_MD=""
if [ -n "$BASELINE" ]; then
  B_ADD=$(calc "$B1_P50 - $D1_P50")
  BRATIO8=$(calc "$B8_RPS / $P8_RPS"); BRATIO_ADD=$(calc "($B1_P50 - $D1_P50) / max($P1_P50 - $D1_P50, 0.001)")
  BRATIOL=$(calc "$BL_RPS / $PL_RPS")
  BASELINE_MD=$(cat <<BMD

Before and after, interleaved in the same rounds: "baseline" is \`$BASELINE\`.

| gateway build | req/s c=8 | CPU µs/req c=8 | added p50 c=1 (µs) | req/s long | c=8 ratio | c=1 added-p50 ratio | long ratio |
|---|---|---|---|---|---|---|---|
| this build | $G8_RPS | $G8_CPU | $G_ADD | $GL_RPS | $RATIO8 | $RATIO_ADD | $RATIOL |
| baseline | $B8_RPS | $B8_CPU | $B_ADD | $BL_RPS | $BRATIO8 | $BRATIO_ADD | $BRATIOL |

(ratios against the bare passthrough of the same rounds, as above)
BMD
)
fi
ROUND_LINES=$(awk '{printf "round %s %s: %s req/s, p50 %s us, %s CPU us/req\n", $1, $2, $3, $4, $5}' "$WORK/rounds.txt")
SECTION=$(cat <<MD
## $TITLE

\`scripts/bench-gateway.sh\` ($BUILD, ${DURATION}s per run, median of $ROUNDS interleaved rounds, $THREADS worker thread per proxy, wrk -t1), run $(date -u +%Y-%m-%dT%H:%MZ) on this machine ($(nproc) cores, shared).
Gateway tokenizer: $TOKENIZER_NAME.
Every front proxies to the same fixed-reply upstream (\`gateway/examples/fixed_upstream.rs\`); the gateway runs with
auth, tenant limits (reserve and settle), tokenization, hashing and \`warm\` routing on; the baseline is a bare Pingora
proxy (\`gateway/examples/passthrough.rs\`); "one-send" is that proxy on the gateway's upstream connector
(\`gateway/src/upstream/\`: a request header leaves with its body in one send), which tells the gateway's I/O from its
request logic; nginx runs 1 worker with upstream keepalive.
Added latency = p50 through the proxy minus p50 straight to the upstream (${D1_P50} µs), at c=1.

| short chat body | req/s c=8 | proxy CPU µs/req c=8 | req/s c=1 | p50 c=1 (µs) | added p50 (µs) |
|---|---|---|---|---|---|
| gateway | $G8_RPS | $G8_CPU | $G1_RPS | $G1_P50 | $G_ADD |
| bare Pingora passthrough | $P8_RPS | $P8_CPU | $P1_RPS | $P1_P50 | $P_ADD |
| passthrough, one-send upstream | $C8_RPS | $C8_CPU | $C1_RPS | $C1_P50 | $C_ADD |
| nginx (1 worker) | $N8_RPS | $N8_CPU | $N1_RPS | $N1_P50 | $N_ADD |

- gateway / passthrough req/s at c=8: **$RATIO8** (goal >= 0.85); passthrough / gateway CPU per request: $CPU8
  (what the req/s ratio tends to when the proxy's one worker thread is the bottleneck).
- gateway / passthrough added p50 at c=1: **$RATIO_ADD** (goal <= 1.5).
- Like for like (gateway / one-send passthrough): req/s at c=8 $RATIO8C (CPU $CPU8C), added p50 at c=1 $RATIO_ADDC,
  long body $RATIOLC.

| long body (25 KB shared system prompt + varying user message, $LONG_TOKENS tokens) | req/s c=8 | proxy CPU µs/req |
|---|---|---|
| gateway | $GL_RPS | $GL_CPU |
| bare Pingora passthrough | $PL_RPS | $PL_CPU |
| passthrough, one-send upstream | $CL_RPS | $CL_CPU |
| nginx (1 worker) | $NL_RPS | $NL_CPU |

- gateway / passthrough req/s at c=8, long body: **$RATIOL** (goal >= 0.5); CPU per request ratio: $CPUL. The system prompt is tokenized once and
  then served from the per-segment token cache (one content hash per request).

$BASELINE_MD

Routing decision for an 8k-token prompt (\`gateway/examples/route_bench.rs\`, 8 replicas, one holding the prefix, p50 µs):
\`$ROUTE\`

<details><summary>Every round (D1 = straight to the upstream, G/P/C/N = gateway/passthrough/one-send passthrough/nginx, B = the baseline gateway when given, 8/1 = connections, L = long body)</summary>

\`\`\`
$ROUND_LINES
\`\`\`
</details>
MD
)
python3 - "$BENCH_OUT" "$SECTION" "$TITLE" <<'PY'
import re, sys, pathlib
path, section = pathlib.Path(sys.argv[1]), sys.argv[2].rstrip() + "\n"
text = path.read_text() if path.exists() else "# Benchmarks\n"
pattern = re.compile(r"^## " + re.escape(sys.argv[3]) + r"\n.*?(?=^## |\Z)", re.S | re.M)
text = pattern.sub(section + "\n", text) if pattern.search(text) else text.rstrip() + "\n\n" + section
path.write_text(text)
PY
echo "$SECTION"

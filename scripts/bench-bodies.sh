#!/usr/bin/env bash
# Long bodies (issue 39): added latency p50/p99 of chat bodies of 16 KiB, 256 KiB, 1 MiB and
# 4 MiB through the gateway (auth, limits, tokenize, hash, `warm` routing on), a bare Pingora
# passthrough and nginx (1 worker), side by side in one run, each in front of the same
# fixed-reply upstream; then short chats alone and while 128k-token prompts are being sent.
# wrk drives every run; each long request's text is new (a run id and a counter open it),
# so the gateway tokenizes every one in full: the worst case, nothing from its piece cache.
# The text is this repository's Markdown docs (real English), repeated to size.
#
#   scripts/bench-bodies.sh                  # DURATION=8 ROUNDS=1 PROFILE=release
#   BENCH_SPEC=spec.json scripts/bench-bodies.sh   # a saved tokenizer spec: no replica run
#   BASELINE_GATEWAY=FILE scripts/bench-bodies.sh  # another gateway build too (before/after)
#   SIZES="16 256" scripts/bench-bodies.sh   # body sizes in KiB
#   KEEP_WORK=DIR scripts/bench-bodies.sh    # keeps the run's configs and logs in DIR
#   WARMPATH_BENCH_DEPS=1 scripts/ci-deps.sh # installs wrk and nginx
#
# Writes the `## long bodies` section of BENCH_OUT (default $CARGO_TARGET_DIR/bench-bodies.md).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)
. scripts/lib/gateway-bench-common.sh
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$ROOT/target}
PROFILE=${PROFILE:-release}
DURATION=${DURATION:-8}
ROUNDS=${ROUNDS:-1}
SIZES=${SIZES:-16 256 1024 4096}
LONG_TOKENS=${LONG_TOKENS:-131072}
SHORT_CONNS=${SHORT_CONNS:-4}
BENCH_OUT=${BENCH_OUT:-$CARGO_TARGET_DIR/bench-bodies.md}
for tool in wrk nginx python3; do
  command -v $tool >/dev/null || { echo "$tool missing: WARMPATH_BENCH_DEPS=1 scripts/ci-deps.sh" >&2; exit 1; }
done
cargo build --profile "$PROFILE" -p gateway --bin gateway --example passthrough --example fixed_upstream --example prompt_bench
BIN=$CARGO_TARGET_DIR/$([ "$PROFILE" = dev ] && echo debug || echo "$PROFILE")
WORK=$(mktemp -d)
PIDS=()
cleanup() {
  [ -n "${NG_MASTER:-}" ] && kill -TERM "$NG_MASTER" 2>/dev/null && sleep 0.5
  for p in "${PIDS[@]}"; do kill -KILL "$p" 2>/dev/null || true; wait "$p" 2>/dev/null || true; done
  [ -n "${KEEP_WORK:-}" ] && cp -r "$WORK" "$KEEP_WORK"; rm -rf "$WORK"
}
trap cleanup EXIT

UP=19300; PT=19301; NG=19302; GW=19303; ADM=19304; REP=19305; GB=19307; ADMB=19308
tokenizer_spec "$WORK/spec.json" "$BIN" "$PROFILE" $REP
[ -s "$WORK/spec.json" ] || { echo "bench-bodies needs a real tokenizer (BENCH_TOKENIZER=smollm2 or BENCH_SPEC)" >&2; exit 1; }
# Tokenize-and-hash throughput first, on a quiet machine (nothing else of ours runs yet).
TOKBENCH=$("$BIN/examples/prompt_bench" "$WORK/spec.json" "$LONG_TOKENS" 7 docs)
echo "prompt_bench: $TOKBENCH"
BYTES_PER_TOKEN=$(echo "$TOKBENCH" | python3 -c 'import json,sys; d=json.load(sys.stdin); print(d["text_bytes"] / d["tokens"])')

"$BIN/examples/fixed_upstream" 127.0.0.1:$UP 1 "$WORK/spec.json" >/dev/null 2>&1 & UP_PID=$!; PIDS+=($UP_PID)
"$BIN/examples/passthrough" 127.0.0.1:$PT 127.0.0.1:$UP 1 >/dev/null 2>&1 & PIDS+=($!)
mkdir -p "$WORK/nginx/logs"
cat > "$WORK/nginx/nginx.conf" <<NGINX
worker_processes 1;
daemon off;
error_log $WORK/nginx/logs/error.log warn;
pid $WORK/nginx/nginx.pid;
events { worker_connections 1024; }
http {
  access_log off;
  client_max_body_size 64m;
  client_body_buffer_size 8m;
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
write_gateway_yaml "$WORK/gateway.yaml" $GW $ADM $UP 1
RUST_LOG=warn "$BIN/gateway" --config "$WORK/gateway.yaml" >/dev/null 2>"$WORK/gateway.log" & PIDS+=($!)
BASELINE=${BASELINE_GATEWAY:-}
if [ -n "$BASELINE" ]; then
  [ -x "$BASELINE" ] || { echo "BASELINE_GATEWAY=$BASELINE: not an executable" >&2; exit 1; }
  write_gateway_yaml "$WORK/baseline.yaml" $GB $ADMB $UP 1
  RUST_LOG=warn "$BASELINE" --config "$WORK/baseline.yaml" >/dev/null 2>"$WORK/baseline.log" & PIDS+=($!)
fi
for _ in $(seq 150); do
  if curl -sf "http://127.0.0.1:$ADM/admin/replicas" | grep -q '"id"' && curl -sf http://127.0.0.1:$PT/ >/dev/null 2>&1 \
    && { [ -z "$BASELINE" ] || curl -sf "http://127.0.0.1:$ADMB/admin/replicas" | grep -q '"id"'; }; then break; fi
  sleep 0.2
done

# Bodies: a chat whose user turn is the docs' text, "Request @@N@@: " first; wrk puts a run
# id and a counter in place of @@N@@ (write_body_lua).
# make_body FILE BYTES: a chat body of about BYTES bytes.
make_body() {
  python3 - "$1" "$2" <<'PY'
import json, pathlib, sys
out, size = sys.argv[1], int(sys.argv[2])
text = "".join(p.read_text() + "\n" for p in sorted(pathlib.Path("docs").glob("*.md")))
head = {"model": "fixed", "max_tokens": 16, "messages": [
    {"role": "system", "content": "You are a helpful assistant."},
    {"role": "user", "content": "Request @@N@@: "}]}
overhead = len(json.dumps(head))
want = max(size - overhead, 1)
body = ""
while len(json.dumps(body)) < want:
    body += text
# Cut to size in characters, then trim while the escaped form is too long.
body = body[:want]
while len(json.dumps(body)) - 2 > want:
    body = body[: len(body) - (len(json.dumps(body)) - 2 - want) - 1]
head["messages"][1]["content"] += body
pathlib.Path(out).write_text(json.dumps(head))
PY
}
# write_body_lua LUA BODY_FILE RUN_ID: wrk posts BODY_FILE with @@N@@ replaced per request.
write_body_lua() {
  cat > "$1" <<LUA
local f = assert(io.open("$2", "rb"))
local body = f:read("*a")
f:close()
local s, e = body:find("@@N@@", 1, true)
local head, tail = body:sub(1, s - 1), body:sub(e + 1)
local headers = { ["Content-Type"] = "application/json", ["Authorization"] = "Bearer $KEY" }
local n = 0
request = function()
  n = n + 1
  return wrk.format("POST", "/v1/chat/completions", headers, head .. "$3-" .. n .. tail)
end
LUA
}
write_short_lua "$WORK/short.lua"
for kib in $SIZES; do make_body "$WORK/body$kib.json" $((kib * 1024)); done
LONG_BYTES=$(python3 -c "print(int($LONG_TOKENS * $BYTES_PER_TOKEN))")
make_body "$WORK/long.json" "$LONG_BYTES"

# Sanity: every front answers 200 to the largest body.
BIG=$(for kib in $SIZES; do echo "$kib"; done | sort -n | tail -1)
for p in $UP $PT $NG $GW ${BASELINE:+$GB}; do
  code=$(curl -s -o /dev/null -w '%{http_code}' -H "Authorization: Bearer $KEY" -H 'Content-Type: application/json' \
    --data-binary @"$WORK/body$BIG.json" http://127.0.0.1:$p/v1/chat/completions)
  [ "$code" = 200 ] || { echo "port $p answered $code to the ${BIG} KiB body" >&2; cat "$WORK/gateway.log" >&2; exit 1; }
done

# wrk_lat CONNS LUA PORT [SECONDS] -> "requests p50_us p99_us"
wrk_lat() {
  local out
  out=$(wrk -t1 -c"$1" -d"${4:-$DURATION}s" --timeout 30s --latency -s "$2" "http://127.0.0.1:$3/v1/chat/completions")
  echo "$out" >> "$WORK/wrk.log"
  local errs
  errs=$(echo "$out" | awk '/Non-2xx/ {print $5}')
  [ -z "$errs" ] || { echo "non-2xx responses on port $3: $errs" >&2; echo "$out" >&2; exit 1; }
  echo "$out" | awk '
    function us(v) { if (v ~ /us$/) { sub("us", "", v); return v } if (v ~ /ms$/) { sub("ms", "", v); return v * 1000 } sub("s", "", v); return v * 1000000 }
    /requests in/ { n = $1 } $1 == "50%" { p50 = us($2) } $1 == "99%" { p99 = us($2) }
    END { print n, p50, p99 }'
}
TARGETS="D:$UP P:$PT N:$NG G:$GW${BASELINE:+ B:$GB}"
: > "$WORK/rows.txt"
RUN=0
for round in $(seq "$ROUNDS"); do
  for kib in $SIZES; do
    for t in $TARGETS; do
      RUN=$((RUN + 1))
      write_body_lua "$WORK/run.lua" "$WORK/body$kib.json" "r$RUN"
      echo "$round body$kib ${t%%:*} $(wrk_lat 1 "$WORK/run.lua" "${t#*:}")" >> "$WORK/rows.txt"
    done
  done
  # Short chats (SHORT_CONNS connections) alone, then while one connection sends 128k-token
  # prompts to the same front (for D, straight to the upstream).
  for t in $TARGETS; do
    echo "$round short ${t%%:*} $(wrk_lat "$SHORT_CONNS" "$WORK/short.lua" "${t#*:}")" >> "$WORK/rows.txt"
    RUN=$((RUN + 1))
    write_body_lua "$WORK/long$RUN.lua" "$WORK/long.json" "r$RUN"
    wrk_lat 1 "$WORK/long$RUN.lua" "${t#*:}" $((DURATION + 1)) > "$WORK/longside.txt" & LPID=$!
    sleep 0.5
    echo "$round mixed ${t%%:*} $(wrk_lat "$SHORT_CONNS" "$WORK/short.lua" "${t#*:}")" >> "$WORK/rows.txt"
    wait $LPID
    echo "$round longside ${t%%:*} $(cat "$WORK/longside.txt")" >> "$WORK/rows.txt"
  done
done

SECTION=$(python3 - "$WORK/rows.txt" "$TOKBENCH" "$BASELINE" "$SIZES" <<'PY'
import json, statistics, sys
rows = {}
for line in open(sys.argv[1]):
    _, kind, t, n, p50, p99 = line.split()
    rows.setdefault((kind, t), []).append((int(n), float(p50), float(p99)))
tok = json.loads(sys.argv[2])
names = {"D": "direct to the upstream", "P": "bare Pingora passthrough", "N": "nginx (1 worker)",
         "G": "gateway", "B": "baseline gateway"}
targets = [t for t in "DPNGB" if ("short", t) in rows]
med = lambda kind, t, i: statistics.median(r[i] for r in rows[(kind, t)])
out = []
out.append("| body | front | requests | p50 (ms) | p99 (ms) | added p50 (ms) | added p99 (ms) |")
out.append("|---|---|---:|---:|---:|---:|---:|")
for kib in sys.argv[4].split():
    k = f"body{kib}"
    d50, d99 = med(k, "D", 1), med(k, "D", 2)
    for t in targets:
        p50, p99 = med(k, t, 1), med(k, t, 2)
        add = "" if t == "D" else f"{(p50 - d50) / 1e3:.2f} | {(p99 - d99) / 1e3:.2f}"
        add = add or "- | -"
        out.append(f"| {kib} KiB | {names[t]} | {int(med(k, t, 0))} | {p50 / 1e3:.2f} | {p99 / 1e3:.2f} | {add} |")
out.append("")
out.append("Short chats alongside 128k-token prompts (added = the front's minus direct's, same condition):")
out.append("")
out.append("| front | short p99 alone (ms) | added p99 alone (ms) | short p99 with long (ms) | added p99 with long (ms) | ratio | long prompts sent, p50 (ms) |")
out.append("|---|---:|---:|---:|---:|---:|---:|")
for t in targets:
    a, m = med("short", t, 2), med("mixed", t, 2)
    da, dm = med("short", "D", 2), med("mixed", "D", 2)
    if t == "D":
        out.append(f"| {names[t]} | {a / 1e3:.3f} | - | {m / 1e3:.3f} | - | - | {int(med('longside', t, 0))}, {med('longside', t, 1) / 1e3:.1f} |")
        continue
    aa, am = a - da, m - dm
    # Below the machine's noise floor (the front's p99 alone under direct's), no ratio.
    ratio = f"{am / aa:.2f}" if aa > 0 else "n/a"
    out.append(f"| {names[t]} | {a / 1e3:.3f} | {aa / 1e3:.3f} | {m / 1e3:.3f} | {am / 1e3:.3f} | {ratio} | {int(med('longside', t, 0))}, {med('longside', t, 1) / 1e3:.1f} |")
print("\n".join(out))
PY
)
ROW_LINES=$(awk '{printf "round %s %s %s: %s requests, p50 %s us, p99 %s us\n", $1, $2, $3, $4, $5, $6}' "$WORK/rows.txt")
MD=$(cat <<MD
## long bodies

\`scripts/bench-bodies.sh\` (PROFILE=$PROFILE, ${DURATION}s per run, $ROUNDS round(s), median of rounds, 1 worker thread per
proxy, wrk -t1), run $(date -u +%Y-%m-%dT%H:%MZ) on this machine ($(nproc) cores, shared with other work: noisy).
Gateway tokenizer: $TOKENIZER_NAME. Every long request's text is new (tokenized in full, no cache hit).
${BASELINE:+Baseline gateway: \`$BASELINE\`.}

Tokenize and hash (\`gateway/examples/prompt_bench.rs\`, one thread): \`$TOKBENCH\`

Bodies at c=1 (added = the front's figure minus the same figure straight to the upstream):

$SECTION

<details><summary>Every run (D = direct, P = passthrough, N = nginx, G = gateway, B = baseline gateway)</summary>

\`\`\`
$ROW_LINES
\`\`\`
</details>
MD
)
python3 - "$BENCH_OUT" "$MD" <<'PY'
import re, sys, pathlib
path, section = pathlib.Path(sys.argv[1]), sys.argv[2].rstrip() + "\n"
text = path.read_text() if path.exists() else "# Benchmarks\n"
pattern = re.compile(r"^## long bodies\n.*?(?=^## |\Z)", re.S | re.M)
text = pattern.sub(section + "\n", text) if pattern.search(text) else text.rstrip() + "\n\n" + section
path.write_text(text)
PY
echo "$MD"

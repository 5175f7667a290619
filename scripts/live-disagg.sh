#!/usr/bin/env bash
# Live prefill/decode disaggregation benchmark (issue #27, second "Done when").
#
# The same two CPU replicas (fresh, cold caches) in two arms, behind one gateway each:
#   colocated:     2 x `replica serve --role both`
#   disaggregated: 1 x `--role prefill` + 1 x `--role decode`
# and one workload, `loadtest run --workload mixed` (mostly short chats plus a stream of
# ~2k-token prompts), same seed and arrivals in both arms. Prints TTFT and TPOT p50/p99
# overall and per class (short / long), and the gateway's KV transfer counts.
#
#   scripts/live-disagg.sh
#   SKIP_BUILD=1 ARMS="disaggregated colocated" OUT_DIR=/tmp/ld scripts/live-disagg.sh
#
# Knobs (environment): ARMS, MIX_REQUESTS, MIX_RATE, MIX_LONG_EVERY, MIX_LONG_LEN,
# MIX_SEED, MIN_PROMPT_TOKENS, KV_MEMORY, REPLICA_THREADS, MODEL, SKIP_BUILD, START_TIMEOUT,
# OUT_DIR. Every process it starts is killed on exit; logs and JSON stay in OUT_DIR.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$ROOT/target}
BIN=$CARGO_TARGET_DIR/release

ARMS=${ARMS:-"colocated disaggregated"}
MIX_REQUESTS=${MIX_REQUESTS:-150}
MIX_RATE=${MIX_RATE:-1}
MIX_LONG_EVERY=${MIX_LONG_EVERY:-8}
MIX_LONG_LEN=${MIX_LONG_LEN:-2048}
MIX_SEED=${MIX_SEED:-1}
MIN_PROMPT_TOKENS=${MIN_PROMPT_TOKENS:-512}
KV_MEMORY=${KV_MEMORY:-512MiB}
REPLICA_THREADS=${REPLICA_THREADS:-1}
SKIP_BUILD=${SKIP_BUILD:-0}
START_TIMEOUT=${START_TIMEOUT:-120}
OUT_DIR=${OUT_DIR:-$(mktemp -d /tmp/live-disagg.XXXXXX)}
mkdir -p "$OUT_DIR"

SCRIPT=live-disagg
# shellcheck source=lib/live-common.sh
. scripts/lib/live-common.sh

echo "live-disagg: outputs and logs in $OUT_DIR"
if [ "$SKIP_BUILD" != 1 ]; then
  cargo build --release -p replica -p gateway -p loadtest --bin replica --bin gateway --bin loadtest
fi
for b in replica gateway loadtest; do
  [ -x "$BIN/$b" ] || die "$BIN/$b missing (build with SKIP_BUILD=0)"
done

GATEWAY_EXTRA_YAML="disaggregation: {min_prompt_tokens: $MIN_PROMPT_TOKENS}"
for arm in $ARMS; do
  echo "== $arm (2 fresh replicas + gateway)"
  case $arm in
    colocated) roles=(both both) ;;
    disaggregated) roles=(prefill decode) ;;
    *) die "unknown arm $arm (colocated, disaggregated)" ;;
  esac
  start_replica "$arm-${roles[0]}" --role "${roles[0]}"
  ra=$REPLICA_URL
  start_replica "$arm-${roles[1]}" --role "${roles[1]}"
  rb=$REPLICA_URL
  start_gateway warm "$ra" "$rb"
  "$BIN/loadtest" run --workload mixed --num-requests "$MIX_REQUESTS" --request-rate "$MIX_RATE" \
    --long-every "$MIX_LONG_EVERY" --long-input-len "$MIX_LONG_LEN" --seed "$MIX_SEED" \
    --endpoint "$GATEWAY_URL" --model "$MODEL_ID" --replicas 2 --policy "$arm" \
    --quiet --request-timeout 600 --json "$OUT_DIR/$arm.json" \
    --requests-jsonl "$OUT_DIR/$arm.requests.jsonl" >"$OUT_DIR/$arm.log" 2>&1 ||
    { tail -n 20 "$OUT_DIR/$arm.log" >&2; die "loadtest run ($arm) failed"; }
  curl -sf --max-time 10 "$GATEWAY_ADMIN/metrics" >"$OUT_DIR/$arm.gateway-metrics.txt" || true
  for u in "$ra" "$rb"; do curl -sf --max-time 10 "$u/metrics" || true; done >"$OUT_DIR/$arm.replica-metrics.txt"
  cp "$OUT_DIR/gateway-warm.log" "$OUT_DIR/gateway-$arm.log" || true
  cleanup
done

echo
echo "workload: mixed, $MIX_REQUESTS requests at $MIX_RATE req/s (Poisson), every $MIX_LONG_EVERY-th a" \
  "$MIX_LONG_LEN-token prompt, seed $MIX_SEED; 2 replicas (--threads $REPLICA_THREADS," \
  "--kv-memory $KV_MEMORY); split at >= $MIN_PROMPT_TOKENS uncached tokens"
python3 - "$OUT_DIR" $ARMS <<'PY'
import json, os, re, sys
out, arms = sys.argv[1], sys.argv[2:]
def f(v):
    return "-" if v is None else f"{v:,.0f}"
print(f"{'arm':<14} {'class':<6} {'n':>4} {'TTFT p50':>9} {'TTFT p99':>9} {'TPOT p50':>9} {'TPOT p99':>9}  (ms)")
for arm in arms:
    o = json.load(open(os.path.join(out, f"{arm}.json")))[0]
    rows = [("all", o.get("completed"), o)] + [
        (k, c.get("completed", c.get("count")), c) for k, c in sorted(o.get("classes", {}).items())]
    for name, n, c in rows:
        print(f"{arm:<14} {name:<6} {n if n is not None else '-':>4} {f(c.get('median_ttft_ms')):>9} "
              f"{f(c.get('p99_ttft_ms')):>9} {f(c.get('median_tpot_ms')):>9} {f(c.get('p99_tpot_ms')):>9}")
    m = open(os.path.join(out, f"{arm}.gateway-metrics.txt")).read()
    t = re.findall(r'warmpath_gateway_kv_transfers_total\{([^}]*)\} (\d+)', m)
    if t:
        print(f"{'':<14} kv transfers: " + ", ".join(f"{l}: {n}" for l, n in t))
    r = open(os.path.join(out, f"{arm}.replica-metrics.txt")).read()
    def total(name):
        return sum(float(v) for v in re.findall(rf'^{name}(?:{{[^}}]*}})? (\S+)$', r, re.M))
    n = total("warmpath_replica_kv_transfer_seconds_count")
    if n:
        print(f"{'':<14} fetch+import per split request: {1000 * total('warmpath_replica_kv_transfer_seconds_sum') / n:,.0f} ms mean "
              f"(overlaps the prefill), {total('warmpath_replica_kv_transfer_tokens_total') / n:,.0f} tokens")
    print(f"{'':<14} prompt tokens computed: {total('warmpath_replica_prompt_tokens_computed_total'):,.0f}, "
          f"cached: {total('warmpath_replica_prompt_tokens_cached_total'):,.0f}")
PY

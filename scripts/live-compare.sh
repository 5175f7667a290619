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

SCRIPT=live-compare
# shellcheck source=lib/live-common.sh
. scripts/lib/live-common.sh

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

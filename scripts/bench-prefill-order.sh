#!/usr/bin/env bash
# The replica's prefill order, live (issue #42 part 5): time to first token of a short chat
# sent while a long prompt prefills, against the same chat on the idle replica, on one CPU
# replica per order (`--prefill-order fcfs` and `shortest`) and per token budget, in one run.
#
# Per replica, ROUNDS rounds of: a short chat on the idle replica (unloaded TTFT); then a
# LONG_TOKENS-token completion (token ids, fresh each round, max_tokens 1) and, once the
# replica reports (GET /v1/replica/load) that it has prefilled at least one chunk of it and has
# more than a quarter of it left, the short chat (loaded TTFT). Every chat is fresh (no
# cache hit). TTFT is the time of a request with max_tokens 1, non-streamed, on loopback.
#
#   scripts/bench-prefill-order.sh
#   SKIP_BUILD=1 ROUNDS=3 BUDGETS=512 OUT_DIR=/tmp/po scripts/bench-prefill-order.sh
#
# Knobs (environment): ROUNDS (5), LONG_TOKENS (6000), BUDGETS ("512 128": each a replica
# `--token-budget`), ORDERS ("fcfs shortest"), REPLICA_THREADS (1), KV_MEMORY (1GiB), MODEL,
# SKIP_BUILD, START_TIMEOUT, OUT_DIR, REPLICA_ARGS (more `replica serve` flags, e.g.
# "--step-target-ms 0").
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$ROOT/target}
BIN=$CARGO_TARGET_DIR/release

ROUNDS=${ROUNDS:-5}
LONG_TOKENS=${LONG_TOKENS:-6000}
BUDGETS=${BUDGETS:-512 128}
ORDERS=${ORDERS:-fcfs shortest}
KV_MEMORY=${KV_MEMORY:-1GiB}
REPLICA_THREADS=${REPLICA_THREADS:-1}
SKIP_BUILD=${SKIP_BUILD:-0}
START_TIMEOUT=${START_TIMEOUT:-120}
OUT_DIR=${OUT_DIR:-$(mktemp -d /tmp/bench-prefill-order.XXXXXX)}
mkdir -p "$OUT_DIR"

SCRIPT=bench-prefill-order
# shellcheck source=lib/live-common.sh
. scripts/lib/live-common.sh

echo "$SCRIPT: outputs and logs in $OUT_DIR"
if [ "$SKIP_BUILD" != 1 ]; then
  cargo build --release -p replica --bin replica
fi
[ -x "$BIN/replica" ] || die "$BIN/replica missing (build with SKIP_BUILD=0)"

for budget in $BUDGETS; do
  for order in $ORDERS; do
    # shellcheck disable=SC2086 # REPLICA_ARGS: words, e.g. "--step-target-ms 100"
    start_replica "$order-$budget" --prefill-order "$order" --token-budget "$budget" ${REPLICA_ARGS:-}
    python3 - "$OUT_DIR/rows.jsonl" "$ROUNDS" "$LONG_TOKENS" "$MODEL_ID" "$REPLICA_URL" \
      "$order" "$budget" <<'PY'
import json, random, statistics as st, sys, threading, time, urllib.request
out, rounds, n, model, url, order, budget = sys.argv[1:]
rounds, n, budget = int(rounds), int(n), int(budget)

def post(path, body):
    req = urllib.request.Request(url + path, json.dumps(body).encode(),
                                 {"content-type": "application/json"})
    t0 = time.perf_counter()
    with urllib.request.urlopen(req, timeout=900) as r:
        data = json.loads(r.read())
    return time.perf_counter() - t0, data

def chat(i, tag):
    msg = f"Question {tag}-{i}: name one colour of the sky, in one word."
    return post("/v1/chat/completions", {"model": model, "max_tokens": 1, "temperature": 0,
                "messages": [{"role": "user", "content": msg}]})

def load():
    return json.loads(urllib.request.urlopen(url + "/v1/replica/load", timeout=30).read())

post("/v1/completions", {"model": model, "prompt": "warm up", "max_tokens": 1})
for i in range(rounds):
    unloaded, c = chat(i, "idle")
    rng = random.Random(7000 + i)
    prompt = [rng.randrange(300, 40000) for _ in range(n)]
    long = {}
    def run_long():
        long["t"], long["d"] = post("/v1/completions",
                                    {"model": model, "prompt": prompt, "max_tokens": 1})
    th = threading.Thread(target=run_long)
    t_long = time.perf_counter()
    th.start()
    # Wait until the long prompt is prefilling with more than a quarter left.
    deadline = time.time() + 600
    while True:
        l = load()
        if l["running"] >= 1 and n // 4 < l["queued_prefill_tokens"] <= n - budget // 2:
            break
        if time.time() > deadline or not th.is_alive():
            sys.exit(f"{order}/{budget} round {i}: never saw the long prompt prefilling ({l})")
        time.sleep(0.01)
    left = l["queued_prefill_tokens"]
    loaded, c2 = chat(i, "busy")
    after = load()["queued_prefill_tokens"]
    th.join()
    row = {"order": order, "budget": budget, "round": i, "unloaded_ms": unloaded * 1000,
           "loaded_ms": loaded * 1000, "ratio": loaded / unloaded,
           "long_ms": long["t"] * 1000, "long_left_at_send": left,
           "long_left_at_answer": after,
           "chat_prompt_tokens": c2["usage"]["prompt_tokens"],
           "long_prompt_tokens": long["d"]["usage"]["prompt_tokens"]}
    with open(out, "a") as f:
        f.write(json.dumps(row) + "\n")
    print(f"{order:8} budget {budget:4} round {i}: chat idle {unloaded*1000:7.1f} ms, "
          f"beside the long prefill {loaded*1000:8.1f} ms ({loaded/unloaded:5.2f}x; "
          f"{left} tokens of it left at send, {after} at answer); long prompt "
          f"{long['t']*1000:8.1f} ms", flush=True)
PY
    cleanup
  done
done

python3 - "$OUT_DIR/rows.jsonl" <<'PY'
import json, statistics as st, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
print()
print("| budget | order | chat TTFT idle, median (ms) | beside a 6,000-token prefill, median (ms) | ratio, median | max | long prompt TTFT, median (ms) |")
print("|---:|---|---:|---:|---:|---:|---:|")
keys = sorted({(r["budget"], r["order"]) for r in rows}, key=lambda k: (-k[0], k[1]))
for b, o in keys:
    rs = [r for r in rows if r["budget"] == b and r["order"] == o]
    med = lambda k: st.median(r[k] for r in rs)
    print(f"| {b} | {o} | {med('unloaded_ms'):,.1f} | {med('loaded_ms'):,.1f} | "
          f"{med('ratio'):.2f}x | {max(r['ratio'] for r in rs):.2f}x | {med('long_ms'):,.1f} |")
PY

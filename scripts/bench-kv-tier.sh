#!/usr/bin/env bash
# Shared KV tier benchmark (issue #26): time to first token of a 2,048-token prompt on a
# replica that has never seen it, four ways, side by side in one run, round by round:
#   recompute  a replica without the tier computes the prompt;
#   tier       a replica with the tier loads the blocks another replica wrote to Redis;
#   local      the tier replica again (the prompt is in its own radix cache);
#   llama.cpp  llama.cpp's llama-server computes the same prompt (cache_prompt off).
# Each round a writer replica (tier on) computes a fresh prompt first; its time against the
# recompute replica's is the tier's write cost on latency; a last phase runs a concurrent
# batch of fresh prompts against both for the write cost on request throughput. TTFT is the time of a request with
# max_tokens 1, non-streamed, on loopback (the answer is one token).
#
#   scripts/bench-kv-tier.sh
#   SKIP_BUILD=1 ROUNDS=3 OUT_DIR=/tmp/kvt scripts/bench-kv-tier.sh
#
# Knobs (environment): ROUNDS (5), PROMPT_TOKENS (2048), REPLICA_THREADS (1), KV_MEMORY
# (1GiB), MODEL, SKIP_BUILD, START_TIMEOUT, OUT_DIR. Needs redis-server
# (scripts/ci-deps.sh installs it); llama-server is built by scripts/llama-server.sh.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$ROOT/target}
BIN=$CARGO_TARGET_DIR/release

ROUNDS=${ROUNDS:-5}
PROMPT_TOKENS=${PROMPT_TOKENS:-2048}
KV_MEMORY=${KV_MEMORY:-1GiB}
REPLICA_THREADS=${REPLICA_THREADS:-1}
SKIP_BUILD=${SKIP_BUILD:-0}
START_TIMEOUT=${START_TIMEOUT:-120}
OUT_DIR=${OUT_DIR:-$(mktemp -d /tmp/bench-kv-tier.XXXXXX)}
mkdir -p "$OUT_DIR"

SCRIPT=bench-kv-tier
# shellcheck source=lib/live-common.sh
. scripts/lib/live-common.sh
command -v redis-server >/dev/null || die "redis-server is missing (scripts/ci-deps.sh installs it)"

echo "bench-kv-tier: outputs and logs in $OUT_DIR"
if [ "$SKIP_BUILD" != 1 ]; then
  cargo build --release -p replica --bin replica
fi
[ -x "$BIN/replica" ] || die "$BIN/replica missing (build with SKIP_BUILD=0)"
LLAMA=$(scripts/llama-server.sh) || die "scripts/llama-server.sh failed"

rport=$(free_port)
redis-server --bind 127.0.0.1 --port "$rport" --save '' --appendonly no \
  --maxmemory 4gb --maxmemory-policy allkeys-lru >"$OUT_DIR/redis.log" 2>&1 &
PIDS+=($!)
REDIS=redis://127.0.0.1:$rport
for _ in $(seq 50); do
  [ "$(redis-cli -p "$rport" PING 2>/dev/null)" = PONG ] && break
  sleep 0.1
done

start_replica writer --kv-store "$REDIS"
writer=$REPLICA_URL
start_replica tier --kv-store "$REDIS"
tier=$REPLICA_URL
start_replica recompute
recompute=$REPLICA_URL
lport=$(free_port)
"$LLAMA" -m "$MODEL" --host 127.0.0.1 --port "$lport" -t "$REPLICA_THREADS" -c 4096 \
  -b 512 -np 1 --alias "$MODEL_ID" >"$OUT_DIR/llama-server.log" 2>&1 &
PIDS+=($!)
llama=http://127.0.0.1:$lport
wait_http llama-server "$!" "$llama/health" "$OUT_DIR/llama-server.log"

python3 - "$OUT_DIR" "$ROUNDS" "$PROMPT_TOKENS" "$MODEL_ID" "$writer" "$tier" "$recompute" "$llama" <<'PY'
import json, random, statistics as st, sys, time, urllib.request
out, rounds, n, model, writer, tier, recompute, llama = sys.argv[1:]
rounds, n = int(rounds), int(n)

def post(url, prompt):
    body = {"model": model, "prompt": prompt, "max_tokens": 1, "temperature": 0,
            "cache_prompt": False}
    req = urllib.request.Request(url + "/v1/completions", json.dumps(body).encode(),
                                 {"content-type": "application/json"})
    t0 = time.perf_counter()
    with urllib.request.urlopen(req, timeout=600) as r:
        data = json.loads(r.read())
        dt = time.perf_counter() - t0
        return dt, dict(r.headers), data

def metric(url, name):
    body = urllib.request.urlopen(url + "/metrics", timeout=10).read().decode()
    return sum(float(l.split()[-1]) for l in body.splitlines() if l.startswith(name))

rows = []
for i in range(rounds):
    rng = random.Random(1000 + i)
    prompt = [rng.randrange(300, 40000) for _ in range(n)]
    written0 = metric(writer, 'warmpath_replica_kv_tier_writes_total{outcome="written"}')
    t_write, _, _ = post(writer, prompt)
    deadline = time.time() + 60
    while (metric(writer, 'warmpath_replica_kv_tier_writes_total{outcome="written"}') - written0 < n // 16
           or metric(writer, "warmpath_replica_kv_tier_queue_bytes") > 0):
        if time.time() > deadline:
            sys.exit("the writer's blocks did not reach Redis within 60 s")
        time.sleep(0.02)
    t_re, _, _ = post(recompute, prompt)
    t_tier, h, d = post(tier, prompt)
    if h.get("x-warmpath-kv-tier") != "hit":
        sys.exit(f"round {i}: tier replica answered x-warmpath-kv-tier={h.get('x-warmpath-kv-tier')}")
    cached = d["usage"].get("prompt_tokens_details", {}).get("cached_tokens", 0)
    t_local, _, _ = post(tier, prompt)
    t_llama, _, dl = post(llama, prompt)
    row = {"round": i, "write": t_write, "recompute": t_re, "tier": t_tier, "local": t_local,
           "llama": t_llama, "tier_cached_tokens": cached,
           "llama_prompt_tokens": dl.get("usage", {}).get("prompt_tokens")}
    rows.append(row)
    print(f"round {i}: writer {t_write*1000:,.0f} ms, recompute {t_re*1000:,.0f} ms, "
          f"tier {t_tier*1000:,.0f} ms ({cached} cached), local {t_local*1000:,.0f} ms, "
          f"llama.cpp {t_llama*1000:,.0f} ms", flush=True)

# The write cost on request throughput: the same batch of distinct prompts (each new to both
# replicas), CONCURRENCY at a time, against the writer (tier on: every full block goes to
# Redis) and the recompute replica (tier off), alternating, best of THROUGHPUT_ROUNDS each.
from concurrent.futures import ThreadPoolExecutor
def batch(url, seed):
    rng = random.Random(seed)
    prompts = [[rng.randrange(300, 40000) for _ in range(TP_TOKENS)] for _ in range(TP_REQUESTS)]
    def one(p):
        body = {"model": model, "prompt": p, "max_tokens": TP_MAX_TOKENS, "temperature": 0,
                "ignore_eos": True}
        req = urllib.request.Request(url + "/v1/completions", json.dumps(body).encode(),
                                     {"content-type": "application/json"})
        with urllib.request.urlopen(req, timeout=600) as r:
            r.read()
    t0 = time.perf_counter()
    with ThreadPoolExecutor(TP_CONCURRENCY) as ex:
        list(ex.map(one, prompts))
    return TP_REQUESTS / (time.perf_counter() - t0)
TP_REQUESTS, TP_TOKENS, TP_MAX_TOKENS, TP_CONCURRENCY = 16, 512, 16, 4
tp = {"tier_on": [], "tier_off": []}
for k in range(3):
    tp["tier_on"].append(batch(writer, 5000 + 2 * k))
    tp["tier_off"].append(batch(recompute, 5001 + 2 * k))
    print(f"throughput round {k}: tier on {tp['tier_on'][-1]:.2f} req/s, "
          f"tier off {tp['tier_off'][-1]:.2f} req/s", flush=True)

med = {k: st.median(r[k] for r in rows) for k in ("write", "recompute", "tier", "local", "llama")}
lookup = metric(tier, "warmpath_replica_kv_tier_lookup_seconds_sum") / max(
    1, metric(tier, "warmpath_replica_kv_tier_lookup_seconds_count"))
summary = {"rounds": rows, "median_s": med,
           "tier_over_recompute": med["tier"] / med["recompute"],
           "local_over_recompute": med["local"] / med["recompute"],
           "llama_over_recompute": med["llama"] / med["recompute"],
           "write_over_recompute": med["write"] / med["recompute"],
           "tier_lookup_mean_s": lookup,
           "tier_bytes_written": metric(writer, "warmpath_replica_kv_tier_write_bytes_total"),
           "throughput_req_per_s": tp,
           "throughput_on_over_off": max(tp["tier_on"]) / max(tp["tier_off"]),
           "writes_dropped": metric(writer, 'warmpath_replica_kv_tier_writes_total{outcome="dropped"}')}
json.dump(summary, open(f"{out}/summary.json", "w"), indent=2)
print()
print(f"{n}-token prompt, median of {rounds} rounds (TTFT = max_tokens 1 request time):")
print("| condition | TTFT ms | x recompute |")
print("|---|---:|---:|")
for k, name in (("recompute", "recompute (tier off)"), ("tier", "tier (Redis, loopback)"),
                ("local", "local radix cache"), ("llama", "llama.cpp recompute")):
    print(f"| {name} | {med[k]*1000:,.0f} | {med[k]/med['recompute']:.3f} |")
print(f"| writer (tier on, writing) | {med['write']*1000:,.0f} | {med['write']/med['recompute']:.3f} |")
print(f"tier lookup + import mean {lookup*1000:.1f} ms; {summary['tier_bytes_written']/1e6:,.0f} MB written")
print(f"throughput ({TP_REQUESTS} x {TP_TOKENS}-token prompts, {TP_MAX_TOKENS} tokens out, "
      f"{TP_CONCURRENCY} at a time, best of 3): tier on {max(tp['tier_on']):.2f} req/s, "
      f"tier off {max(tp['tier_off']):.2f} req/s, ratio {summary['throughput_on_over_off']:.3f}; "
      f"{summary['writes_dropped']:.0f} block writes dropped")
PY

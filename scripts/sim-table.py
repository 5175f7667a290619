#!/usr/bin/env python3
"""Markdown table and the warm-vs-baselines verdict from the JSON scripts/sim-matrix.sh writes."""
import json, sys, os
out = sys.argv[1] if len(sys.argv) > 1 else "target/sim-matrix"
names = ["mooncake-8", "mooncake-64", "shared-prefix-8", "shared-prefix-64",
         "shared-prefix-8-seed2", "shared-prefix-8-seed3"]
print("| scenario | policy | hit % | oracle % | TTFT mean ms | TTFT p99 ms | req/s | out tok/s |")
print("|---|---|---:|---:|---:|---:|---:|---:|")
verdict = []
for n in names:
    f = os.path.join(out, n + ".json")
    if not os.path.exists(f):
        continue
    rows = json.load(open(f))
    first = True
    for r in rows:
        print("| %s | %s | %.2f | %s | %.1f | %.1f | %.2f | %.0f |" % (
            n if first else "", r["policy"], 100 * r["cache_hit_rate"],
            "%.2f" % (100 * r["oracle_hit_rate"]) if first else "",
            r["mean_ttft_ms"], r["p99_ttft_ms"], r["request_throughput"], r["output_throughput"]))
        first = False
    by = {r["policy"]: r for r in rows}
    w = by["warm"]
    for b in ["round_robin", "cache_aware"]:
        o = by[b]
        verdict.append("%s: warm vs %s: hit %.3f vs %.3f (%s), p99 %.1f vs %.1f ms (%s)" % (
            n, b, 100 * w["cache_hit_rate"], 100 * o["cache_hit_rate"],
            "win" if w["cache_hit_rate"] > o["cache_hit_rate"] else ("tie" if w["cache_hit_rate"] == o["cache_hit_rate"] else "LOSS"),
            w["p99_ttft_ms"], o["p99_ttft_ms"],
            "win" if w["p99_ttft_ms"] < o["p99_ttft_ms"] else "LOSS"))
    verdict.append("%s: warm branches %s" % (n, w.get("route_branches")))
print()
print("\n".join(verdict))

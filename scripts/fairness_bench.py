#!/usr/bin/env python3
"""Fairness benchmark driver (issue 42), run by scripts/fairness-bench.sh.

Against one gateway, open loop: tenant B sends short streaming chats at a steady
--b-rate (requests per second) and we record each one's time to first token (the first
SSE `data:` line with content); tenant A either stays idle ("alone") or sends new
~400-token prompts at --a-factor times B's rate ("burst"), each request on its own
thread, so A's backlog grows when the replicas cannot keep up. With --a-priority batch,
A's requests carry `x-priority: batch`. Prints one JSON line: B's TTFT p50/p99/max (ms),
B's and A's request counts, A's refusals (429/503), errors. Standard library only.
"""
import argparse
import http.client
import json
import random
import sys
import threading
import time

WORDS = ("river stone lamp orchard velvet signal harbor copper meadow lantern cipher "
         "granite willow beacon thunder saffron compass glacier ember quartz").split()


def chat(host, port, key, content, max_tokens, headers=None):
    body = json.dumps({
        "model": MODEL, "stream": True, "max_tokens": max_tokens, "temperature": 0,
        "messages": [{"role": "user", "content": content}],
    })
    h = {"Authorization": f"Bearer {key}", "Content-Type": "application/json"}
    h.update(headers or {})
    start = time.monotonic()
    conn = http.client.HTTPConnection(host, port, timeout=300)
    try:
        conn.request("POST", "/v1/chat/completions", body, h)
        r = conn.getresponse()
        if r.status != 200:
            r.read()
            return r.status, None
        ttft = None
        for line in r:
            if ttft is None and line.startswith(b"data:") and b'"content"' in line:
                ttft = time.monotonic() - start
        return 200, ttft
    except OSError:
        return 0, None
    finally:
        conn.close()


def pct(xs, p):
    """Nearest-rank percentile (the p-th value of the sorted sample, rounded up)."""
    xs = sorted(xs)
    if not xs:
        return None
    k = max(1, -(-len(xs) * p // 100))
    return xs[int(k) - 1]


def main():
    global MODEL
    ap = argparse.ArgumentParser()
    ap.add_argument("--addr", required=True)
    ap.add_argument("--model", required=True)
    ap.add_argument("--mode", choices=["alone", "burst"], required=True)
    ap.add_argument("--seconds", type=float, default=40)
    ap.add_argument("--b-rate", type=float, default=1.0)
    ap.add_argument("--a-factor", type=float, default=10.0)
    ap.add_argument("--a-priority", default="")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--trace", action="store_true", help="each B request's send time and TTFT on stderr")
    a = ap.parse_args()
    MODEL = a.model
    host, port = a.addr.rsplit(":", 1)
    port = int(port)
    stats = {"a_sent": 0, "a_ok": 0, "a_refused": 0, "a_err": 0, "b_err": 0}
    lock = threading.Lock()
    threads = []
    hdr = {"x-priority": a.a_priority} if a.a_priority else {}

    def one_a(n, words):
        st, _ = chat(host, port, "key-a", f"Burst turn {n}: {words}. Summarise.", 8, hdr)
        with lock:
            key = "a_ok" if st == 200 else "a_refused" if st in (429, 503) else "a_err"
            stats[key] += 1

    def one_b(n, out):
        sent = time.time()
        st, ttft = chat(host, port, "key-b", f"Hi #{n}, name a colour.", 4)
        with lock:
            if st == 200 and ttft is not None:
                out.append(ttft * 1000)
                if a.trace:
                    print(f"b {n} sent {sent:.3f} ttft_ms {ttft * 1000:.1f}", file=sys.stderr)
            else:
                stats["b_err"] += 1

    rng = random.Random(a.seed)
    ttfts = []
    t0 = time.monotonic()
    lead = 2.0 if a.mode == "burst" else 0.0  # A's burst fills the queues first
    a_gap = 1.0 / (a.b_rate * a.a_factor)
    b_gap = 1.0 / a.b_rate
    next_a, next_b = t0, t0 + lead
    end = t0 + lead + a.seconds
    na = nb = 0
    while True:
        now = time.monotonic()
        if now >= end:
            break
        if a.mode == "burst" and next_a <= now:
            # A new ~400-token prompt each time (no cache hits).
            words = " ".join(rng.choice(WORDS) for _ in range(380))
            t = threading.Thread(target=one_a, args=(na, words), daemon=True)
            t.start()
            threads.append(t)
            na += 1
            next_a += a_gap
            continue
        if next_b <= now:
            t = threading.Thread(target=one_b, args=(nb, ttfts), daemon=True)
            t.start()
            threads.append(t)
            nb += 1
            next_b += b_gap
            continue
        wake = min(next_b, next_a if a.mode == "burst" else end, end)
        time.sleep(max(0.0, wake - time.monotonic()))
    stats["a_sent"] = na
    for t in threads:
        t.join(timeout=300)
    print(json.dumps({
        "mode": a.mode, "a_priority": a.a_priority or "interactive", "b_requests": len(ttfts),
        "b_p50_ms": round(pct(ttfts, 50), 1) if ttfts else None,
        "b_p99_ms": round(pct(ttfts, 99), 1) if ttfts else None,
        "b_max_ms": round(max(ttfts), 1) if ttfts else None, **stats,
    }))


if __name__ == "__main__":
    sys.exit(main())

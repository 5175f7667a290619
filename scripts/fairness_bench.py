#!/usr/bin/env python3
"""Fairness benchmark driver (issue 42), run by scripts/fairness-bench.sh.

Against one gateway: tenant B sends short streaming chats one after another and we record
each one's time to first token (the first SSE `data:` line with content); tenant A either
stays idle ("alone") or runs LOOPS concurrent loops of ~400-token prompts ("burst"), both
well inside their limits. With --a-priority batch, A's requests carry `x-priority: batch`.
Prints one JSON line: B's TTFT p50/p99 (ms), B's and A's request counts, errors.
Standard library only.
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
    conn = http.client.HTTPConnection(host, port, timeout=120)
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
    finally:
        conn.close()


def pct(xs, p):
    xs = sorted(xs)
    if not xs:
        return None
    return xs[min(len(xs) - 1, int(round(p / 100 * (len(xs) - 1))))]


def main():
    global MODEL
    ap = argparse.ArgumentParser()
    ap.add_argument("--addr", required=True)
    ap.add_argument("--model", required=True)
    ap.add_argument("--mode", choices=["alone", "burst"], required=True)
    ap.add_argument("--seconds", type=float, default=30)
    ap.add_argument("--loops", type=int, default=8)
    ap.add_argument("--a-priority", default="")
    a = ap.parse_args()
    MODEL = a.model
    host, port = a.addr.rsplit(":", 1)
    port = int(port)
    stop = threading.Event()
    stats = {"a_ok": 0, "a_err": 0, "b_err": 0}
    lock = threading.Lock()

    def loop_a(i):
        rng = random.Random(i)
        n = 0
        while not stop.is_set():
            # A new ~400-token prompt each time (no cache hits).
            words = " ".join(rng.choice(WORDS) for _ in range(380))
            hdr = {"x-priority": a.a_priority} if a.a_priority else {}
            st, _ = chat(host, port, "key-a", f"Loop {i} turn {n}: {words}. Summarise.", 8, hdr)
            n += 1
            with lock:
                stats["a_ok" if st == 200 else "a_err"] += 1

    threads = []
    if a.mode == "burst":
        for i in range(a.loops):
            t = threading.Thread(target=loop_a, args=(i,), daemon=True)
            t.start()
            threads.append(t)
        time.sleep(2)  # let the burst fill the queues before B's first sample
    ttfts = []
    end = time.monotonic() + a.seconds
    n = 0
    while time.monotonic() < end:
        st, ttft = chat(host, port, "key-b", f"Hi #{n}, name a colour.", 4)
        n += 1
        if st == 200 and ttft is not None:
            ttfts.append(ttft * 1000)
        else:
            stats["b_err"] += 1
        time.sleep(0.05)
    stop.set()
    for t in threads:
        t.join(timeout=120)
    print(json.dumps({
        "mode": a.mode, "a_priority": a.a_priority or "interactive", "b_requests": len(ttfts),
        "b_p50_ms": round(pct(ttfts, 50), 1) if ttfts else None,
        "b_p99_ms": round(pct(ttfts, 99), 1) if ttfts else None,
        "b_max_ms": round(max(ttfts), 1) if ttfts else None, **stats,
    }))


if __name__ == "__main__":
    sys.exit(main())

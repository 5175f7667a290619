#!/usr/bin/env python3
"""Deadline goodput driver (issue 42, "Done when" line 3), run by scripts/deadline-bench.sh.

Against one gateway in front of CPU replicas:

  capacity  closed loop: CONC workers send new prompts back to back for SECONDS; the
            completions per second are the fleet's capacity for this request shape.
  open      open loop: Poisson arrivals at RATE per second for SECONDS; each request
            streams, and its time to first token (first SSE line with content) is kept.
            With --objective-ms, the requests carry `x-slo-ttft-ms` (the gateway sheds
            what it cannot serve in time, 503); without it they queue first come, first
            served. Goodput counts the requests whose first token came within the objective
            (--count-ms, the same objective, for both arms), per second of the phase.
            With --batch-rate, a second Poisson stream of `x-priority: batch` requests
            runs beside it (issue 42, line 2: priority under overload), and the line
            reports each class apart.

Every prompt is new (random words: no cache hit). Prints one JSON line. Standard library
only.
"""
import argparse
import http.client
import json
import random
import threading
import time

WORDS = ("river stone lamp orchard velvet signal harbor copper meadow lantern cipher "
         "granite willow beacon thunder saffron compass glacier ember quartz").split()


def prompt(rng, words):
    return " ".join(rng.choice(WORDS) for _ in range(words))


def first_text(line):
    """Whether an SSE line carries text (not the opening chunk's empty `content`)."""
    if not line.startswith(b"data:") or b'"content"' not in line:
        return False
    try:
        choices = json.loads(line[5:]).get("choices") or [{}]
    except ValueError:
        return False
    return bool((choices[0].get("delta") or {}).get("content"))


def chat(addr, model, key, content, max_tokens, headers):
    host, port = addr.rsplit(":", 1)
    body = json.dumps({
        "model": model, "stream": True, "max_tokens": max_tokens, "temperature": 0,
        "messages": [{"role": "user", "content": content}],
    })
    h = {"Authorization": f"Bearer {key}", "Content-Type": "application/json"}
    h.update(headers)
    start = time.monotonic()
    conn = http.client.HTTPConnection(host, int(port), timeout=300)
    try:
        conn.request("POST", "/v1/chat/completions", body, h)
        r = conn.getresponse()
        if r.status != 200:
            r.read()
            return r.status, None, time.monotonic() - start
        ttft = None
        for line in r:
            if ttft is None and first_text(line):
                ttft = time.monotonic() - start
        return 200, ttft, time.monotonic() - start
    except OSError:
        return 0, None, time.monotonic() - start
    finally:
        conn.close()


def pct(xs, p):
    xs = sorted(xs)
    if not xs:
        return None
    return round(xs[min(len(xs) - 1, int(p / 100 * len(xs)))] * 1000, 1)


def capacity(a):
    stop = time.monotonic() + a.seconds
    done, lock = [], threading.Lock()

    def worker(i):
        r = random.Random(a.seed * 1000 + i)
        while time.monotonic() < stop:
            status, ttft, total = chat(a.addr, a.model, a.key, prompt(r, a.words),
                                       a.max_tokens, {})
            if status == 200 and time.monotonic() <= stop:
                with lock:
                    done.append((ttft, total))

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(a.conc)]
    t0 = time.monotonic()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    elapsed = time.monotonic() - t0
    ok = [x[0] for x in done if x[0] is not None]
    return {"phase": "capacity", "conc": a.conc, "completed": len(done),
            "per_s": round(len(done) / a.seconds, 3), "elapsed_s": round(elapsed, 1),
            "ttft_p50_ms": pct(ok, 50), "ttft_p99_ms": pct(ok, 99),
            "total_p50_ms": pct([x[1] for x in done], 50)}


def summary(results, a):
    """The figures of one class's results (status, ttft, total)."""
    count_s = a.count_ms / 1000
    ok = [r for r in results if r[0] == 200 and r[1] is not None]
    met = [r for r in ok if r[1] <= count_s]
    shed = [r for r in results if r[0] in (429, 503)]
    return {"sent": len(results), "served": len(ok), "shed": len(shed),
            "errors": len(results) - len(ok) - len(shed),
            "met": len(met), "goodput_per_s": round(len(met) / a.seconds, 3),
            "ttft_p50_ms": pct([r[1] for r in ok], 50),
            "ttft_p99_ms": pct([r[1] for r in ok], 99),
            "ttft_max_ms": pct([r[1] for r in ok], 100),
            "total_p50_ms": pct([r[2] for r in ok], 50),
            "shed_answer_p50_ms": pct([r[2] for r in shed], 50)}


def open_loop(a):
    results = {"interactive": [], "batch": []}
    lock = threading.Lock()
    headers = {"x-slo-ttft-ms": str(a.objective_ms)} if a.objective_ms else {}
    threads, t_lock = [], threading.Lock()

    def one(content, cls, hdr):
        status, ttft, total = chat(a.addr, a.model, a.key, content, a.max_tokens, hdr)
        with lock:
            results[cls].append((status, ttft, total))

    def arrivals(rate, seed, cls, hdr):
        # Arrival times from --seed (the same stream in every phase that uses the seed);
        # prompts from --prompt-seed (new words per phase: no cache hit across phases).
        rng = random.Random(seed)
        words = random.Random(a.prompt_seed * 7919 + seed)
        at = 0.0
        while True:
            at += rng.expovariate(rate)
            if at >= a.seconds:
                return
            delay = t0 + at - time.monotonic()
            if delay > 0:
                time.sleep(delay)
            t = threading.Thread(target=one, args=(prompt(words, a.words), cls, hdr))
            t.start()
            with t_lock:
                threads.append(t)

    t0 = time.monotonic()
    streams = [threading.Thread(target=arrivals,
                                args=(a.rate, a.seed, "interactive", headers))]
    if a.batch_rate > 0:
        streams.append(threading.Thread(
            target=arrivals,
            args=(a.batch_rate, a.seed + 7919, "batch", {**headers, "x-priority": "batch"})))
    for s in streams:
        s.start()
    for s in streams:
        s.join()
    for t in threads:
        t.join()
    out = {"phase": "open", "rate": a.rate, "objective_ms": a.objective_ms or None,
           "count_ms": a.count_ms, **summary(results["interactive"], a),
           "drain_s": round(time.monotonic() - t0 - a.seconds, 1)}
    if a.batch_rate > 0:
        out["batch_rate"] = a.batch_rate
        out["batch"] = summary(results["batch"], a)
    return out


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--addr", required=True)
    p.add_argument("--model", required=True)
    p.add_argument("--key", default="key-d")
    p.add_argument("--phase", choices=["capacity", "open"], required=True)
    p.add_argument("--seconds", type=float, default=30)
    p.add_argument("--conc", type=int, default=4)
    p.add_argument("--rate", type=float, default=1.0)
    p.add_argument("--batch-rate", type=float, default=0.0)
    p.add_argument("--objective-ms", type=int, default=0)
    p.add_argument("--count-ms", type=int, default=1000)
    p.add_argument("--words", type=int, default=60)
    p.add_argument("--max-tokens", type=int, default=4)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--prompt-seed", type=int, default=0,
                   help="open loop: seeds the prompts' words apart from the arrival times")
    a = p.parse_args()
    print(json.dumps(capacity(a) if a.phase == "capacity" else open_loop(a)), flush=True)


if __name__ == "__main__":
    main()

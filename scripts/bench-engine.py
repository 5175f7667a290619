#!/usr/bin/env python3
"""Side-by-side engine benchmark: llama.cpp (llama-cpp-python) vs `replica bench`.

Same GGUF, same thread count, same shapes: prefill of a 512-token prompt (best of N) and
single-stream decode. Runs the two alternately (ABAB...) so machine noise hits both, and
prints a JSON summary with the ratios.

Usage: python3 scripts/bench-engine.py --replica target/release/replica [--threads 2]
       python3 scripts/bench-engine.py --replica before=/tmp/replica-old after=target/release/replica
(several replica builds, each as LABEL=PATH, run in the same rounds: before/after in one run)
       python3 scripts/bench-engine.py --no-llamacpp --rounds 6 --replica before=A after=B
(builds only, without llama-cpp-python: ratios against the first build; per-round medians too)
"""
import argparse
import json
import os
import subprocess
import sys
import time

import statistics


def bench_llamacpp(model, threads, prompt_tokens, decode_tokens, reps):
    import numpy as np
    from llama_cpp import Llama
    llm = Llama(model_path=model, n_ctx=prompt_tokens + decode_tokens + 8, n_batch=prompt_tokens,
                n_ubatch=prompt_tokens, n_threads=threads, n_threads_batch=threads,
                logits_all=False, verbose=False)
    vocab = llm.n_vocab()
    prompt = [int((i * 2654435761 % 2**32) >> 7) % vocab for i in range(prompt_tokens)]
    best = float("inf")
    for _ in range(reps):
        llm.reset()
        t0 = time.perf_counter()
        llm.eval(prompt)
        best = min(best, time.perf_counter() - t0)
    nxt = int(np.argmax(np.ctypeslib.as_array(llm._ctx.get_logits_ith(-1), shape=(vocab,))))
    t0 = time.perf_counter()
    for _ in range(decode_tokens):
        llm.eval([nxt])
        nxt = int(np.argmax(np.ctypeslib.as_array(llm._ctx.get_logits_ith(-1), shape=(vocab,))))
    dec = time.perf_counter() - t0
    return {"prefill_tok_s": prompt_tokens / best, "decode_tok_s": decode_tokens / dec}


def bench_replica(binary, model, threads, prompt_tokens, decode_tokens, reps):
    out = subprocess.run([binary, "bench", "--model", model, "--threads", str(threads),
                          "--prompt-tokens", str(prompt_tokens), "--decode-tokens", str(decode_tokens),
                          "--reps", str(reps), "--json"], check=True, capture_output=True, text=True)
    return json.loads(out.stdout)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--replica", required=True, nargs="+",
                    help="replica binary, or several as LABEL=PATH")
    ap.add_argument("--model", default=os.path.expanduser("~/.cache/warmpath/models/SmolLM2-135M-Instruct.Q4_1.gguf"))
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--prompt-tokens", type=int, default=512)
    ap.add_argument("--decode-tokens", type=int, default=128)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--no-llamacpp", action="store_true",
                    help="compare the replica builds only; ratios are against the first build")
    args = ap.parse_args()
    builds = [r.split("=", 1) if "=" in r else ["replica", r] for r in args.replica]
    rows = []
    for r in range(args.rounds):
        row = {"round": r}
        if not args.no_llamacpp:
            row["llamacpp"] = bench_llamacpp(args.model, args.threads, args.prompt_tokens,
                                             args.decode_tokens, args.reps)
        # Alternate the builds' order from round to round, so neither always runs first.
        for label, path in (builds if r % 2 == 0 else builds[::-1]):
            w = bench_replica(path, args.model, args.threads, args.prompt_tokens, args.decode_tokens, args.reps)
            row[label] = {k: w[k] for k in ("prefill_tok_s", "decode_tok_s")}
        rows.append(row)
        print(json.dumps(row), file=sys.stderr)
    best = lambda who, k: max(row[who][k] for row in rows)
    median = lambda who, k: statistics.median(row[who][k] for row in rows)
    summary = {
        "threads": args.threads,
        "prompt_tokens": args.prompt_tokens,
        "decode_tokens": args.decode_tokens,
        "rounds": args.rounds,
    }
    ref = builds[0][0]
    if not args.no_llamacpp:
        ref = "llamacpp"
        summary["llamacpp_prefill_tok_s"] = best("llamacpp", "prefill_tok_s")
        summary["llamacpp_decode_tok_s"] = best("llamacpp", "decode_tok_s")
    for label, _ in builds:
        for k in ("prefill", "decode"):
            summary[f"{label}_{k}_tok_s"] = best(label, f"{k}_tok_s")
            summary[f"{label}_{k}_median_tok_s"] = median(label, f"{k}_tok_s")
            summary[f"{label}_{k}_ratio"] = best(label, f"{k}_tok_s") / best(ref, f"{k}_tok_s")
    print(json.dumps(summary, indent=1))


if __name__ == "__main__":
    main()

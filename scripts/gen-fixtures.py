#!/usr/bin/env python3
"""Generate llama.cpp reference fixtures for the replica engine tests.

Runs llama.cpp (through llama-cpp-python) on the default SmolLM2-135M-Instruct Q4_1 GGUF
and writes engine/fixtures/llamacpp_smollm2.json with:
  - tokenize: token ids of 50 varied strings (special tokens parsed, no BOS);
  - prompts: 10 prompts (raw and chat-templated) with their token ids, the 32-token greedy
    continuation, the top-1 id of the last-position logits, and the full last-position
    logits stored compactly as f16 little-endian, base64 (f16 rounding is ~5e-4 relative,
    far below the 2e-2 tolerance the tests check).

Usage: python3 scripts/gen-fixtures.py [--model PATH] [--out FILE]
Needs: pip install llama-cpp-python numpy jinja2 (CPU build; several minutes on 2 cores).
The fixtures in the repo were generated with llama-cpp-python 0.3.36 (llama.cpp built for
the AVX-512 host) with its defaults: f16 KV cache, flash attention off, 2 threads. The
engine reproduces those roundings (see engine/src/attention.rs), so its logits
agree to f16 storage precision (relative L2 ~2e-4).
"""
import argparse
import base64
import json
import os
import sys

import jinja2
import jinja2.sandbox
import numpy as np
from llama_cpp import Llama, __version__ as llama_cpp_version

STRINGS = [
    "Hello, world!",
    "hello world",
    " leading space",
    "trailing space ",
    "  two leading spaces",
    "multiple    spaces   inside",
    "tabs\tand\ttabs",
    "new\nlines\n\nand\r\nCRLF",
    "\n\n\n",
    "   ",
    "",
    "a",
    "1234567890",
    "3.14159 and 2,718,281",
    "The year 2024 had 366 days.",
    "It's a dog's life; they're here, we've gone, I'm sure, you'll see, he'd know.",
    "CamelCaseIdentifier and snake_case_identifier",
    "def fib(n):\n    return n if n < 2 else fib(n - 1) + fib(n - 2)\n",
    "fn main() { println!(\"{}\", 1 + 2); }",
    "<div class=\"x\">&amp; &lt;tag&gt;</div>",
    "SELECT * FROM users WHERE id = 42;",
    "https://example.com/path?query=1&b=two#frag",
    "email@example.org",
    "Ünïcödé àccênts: café, naïve, Zürich",
    "Русский текст для проверки",
    "中文测试：你好，世界！",
    "日本語のテキストです。",
    "한국어 텍스트",
    "العربية نص",
    "עברית",
    "हिन्दी पाठ",
    "Emoji: 😀🎉👍🏽 and 🇫🇷 flags",
    "👨‍👩‍👧‍👦 family",
    "Math: ∑ x² ≤ ∞, α β γ δ",
    "Symbols: ~!@#$%^&*()_+-=[]{}|;':\",./<>?",
    "«quotes» “curly” ‘single’ — dash … ellipsis",
    "<|im_start|>user\nWhat is 2+2?<|im_end|>\n<|im_start|>assistant\n",
    "<|endoftext|>",
    "text<|im_end|>more text",
    "<|im_start|><|im_start|>",
    "ALL CAPS SENTENCE HERE",
    "mIxEd CaSe WoRdS",
    "don't DON'T Don'T",
    "a\u00a0non-breaking space",
    "zero\u200bwidth",
    "Ω≈ç√∫˜µ≤≥÷",
    "x" * 100,
    "The quick brown fox jumps over the lazy dog. " * 3,
    "Line one.\n\tIndented line two.\n        Deep indent three.",
    "JSON: {\"key\": [1, 2, {\"nested\": null}], \"ok\": true}",
]

RAW_PROMPTS = [
    "The capital of France is",
    "def add(a, b):\n    \"\"\"Return the sum of a and b.\"\"\"\n",
    "Once upon a time, in a small village,",
    "1, 2, 3, 4, 5,",
    "Photosynthesis is the process by which",
]
CHAT_PROMPTS = [
    "What is the capital of Germany?",
    "Write a haiku about the sea.",
    "Explain recursion in one sentence.",
    "List three primary colors.",
    "Translate 'good morning' to French.",
]
N_GREEDY = 32


def last_logits(llm):
    """Logits of the last evaluated position, copied out of the llama.cpp context.

    (`Llama.scores` is only filled with `logits_all=True` in llama-cpp-python >= 0.3.)
    """
    ptr = llm._ctx.get_logits_ith(-1)
    return np.ctypeslib.as_array(ptr, shape=(llm.n_vocab(),)).astype(np.float32).copy()


def main():
    ap = argparse.ArgumentParser()
    default_model = os.path.expanduser("~/.cache/warmpath/models/SmolLM2-135M-Instruct.Q4_1.gguf")
    ap.add_argument("--model", default=default_model)
    here = os.path.dirname(os.path.abspath(__file__))
    ap.add_argument("--out", default=os.path.join(here, "..", "engine", "fixtures", "llamacpp_smollm2.json"))
    args = ap.parse_args()
    assert len(STRINGS) == 50, len(STRINGS)

    llm = Llama(model_path=args.model, n_ctx=1024, n_batch=512, n_threads=2,
                logits_all=False, verbose=False)
    add_bos = llm.metadata.get("tokenizer.ggml.add_bos_token", "false") == "true"
    template = llm.metadata["tokenizer.chat_template"]
    eos = llm.detokenize([llm.token_eos()]).decode("utf-8", "replace")
    bos = llm.detokenize([llm.token_bos()]).decode("utf-8", "replace")
    # As HF `apply_chat_template` and llama-cpp-python's Jinja2ChatFormatter do.
    env = jinja2.sandbox.ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True)
    tmpl = env.from_string(template)

    tok_cases = []
    for s in STRINGS:
        ids = llm.tokenize(s.encode("utf-8"), add_bos=False, special=True)
        tok_cases.append({"text": s, "ids": ids})

    prompts = []
    for kind, texts in (("raw", RAW_PROMPTS), ("chat", CHAT_PROMPTS)):
        for t in texts:
            if kind == "chat":
                text = tmpl.render(messages=[{"role": "user", "content": t}],
                                   add_generation_prompt=True, bos_token=bos, eos_token=eos)
            else:
                text = t
            ids = llm.tokenize(text.encode("utf-8"), add_bos=add_bos, special=True)
            llm.reset()
            llm.eval(ids)
            logits = last_logits(llm)
            greedy = []
            cur = logits
            for _ in range(N_GREEDY):
                nxt = int(np.argmax(cur))
                greedy.append(nxt)
                llm.eval([nxt])
                cur = last_logits(llm)
            prompts.append({
                "kind": kind,
                "message": t,
                "text": text,
                "ids": ids,
                "greedy": greedy,
                "top1": int(np.argmax(logits)),
                "logits_f16_b64": base64.b64encode(logits.astype("<f2").tobytes()).decode(),
            })
            print(f"{kind}: {t!r}: {len(ids)} tokens -> {greedy[:8]}...", file=sys.stderr)

    out = {
        "generator": "scripts/gen-fixtures.py",
        "llama_cpp_python": llama_cpp_version,
        "model": os.path.basename(args.model),
        "add_bos": add_bos,
        "tokenize": tok_cases,
        "prompts": prompts,
    }
    with open(args.out, "w", encoding="utf-8") as f:
        json.dump(out, f, ensure_ascii=False, indent=0)
    print(f"wrote {args.out}", file=sys.stderr)


if __name__ == "__main__":
    main()

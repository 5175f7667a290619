#!/usr/bin/env python3
"""A mock vLLM for the agent-loop measurement (tests/tests/agent_loop.rs,
scripts/bench-agent-loop.sh): a test double for the engine, not a model.

What it does as vLLM does:
- renders a chat as vLLM does: its message preparation (`prepare` in
  scripts/render_reference.py, from vllm/entrypoints/chat_utils.py), then `transformers`'
  `apply_chat_template` with the model's template and `encode(add_special_tokens=False)`;
  a completion's prompt is encoded with special tokens;
- takes requests into its scheduler in arrival order (rendered in parallel);
- keeps a prefix cache of full blocks (`--block-size`, 16), chained by an engine hash of
  (parent hash, tokens), evicted LRU beyond `--capacity-blocks` (a request's blocks are
  touched last-to-first, so a prefix outlives its tails, as vLLM's free queue orders them);
- reports the prompt's longest cached run of full blocks as
  `usage.prompt_tokens_details.cached_tokens` (at most (prompt_tokens - 1) // block_size
  blocks: vLLM recomputes the last token of a fully cached prompt);
- publishes vLLM's KV events for exactly the blocks it stores and evicts: a ZeroMQ PUB
  socket sending (topic, 8-byte big-endian sequence number, msgspec msgpack `EventBatch`,
  array-like `[ts, [["BlockStored", hashes, parent, token_ids, block_size, lora_id,
  medium], ...], dp_rank]`), and a ROUTER socket answering replay requests from a buffer,
  as vLLM's `ZmqEventPublisher` does.
It generates nothing: every answer is the text "ok" (one completion token).

usage: mock_vllm.py --port P --kv-port K --replay-port R --tokenizer tokenizer.json
                    --template T.jinja [--bos TEXT] [--eos TEXT] [--model NAME]
Prints "ready" on stdout once it serves.
"""
import argparse
import collections
import hashlib
import json
import os
import struct
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Optional

import msgspec
import zmq
from transformers import PreTrainedTokenizerFast

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from render_reference import prepare  # noqa: E402  vLLM's message preparation


class Batch(msgspec.Struct, array_like=True, omit_defaults=True, gc=False):
    ts: float
    events: list[Any]
    data_parallel_rank: Optional[int] = None


class Event(msgspec.Struct, array_like=True, omit_defaults=True, gc=False, tag=True):
    pass


class Stored(Event, tag="BlockStored"):
    block_hashes: list[int]
    parent_block_hash: Optional[int]
    token_ids: list[int]
    block_size: int
    lora_id: Optional[int]
    medium: Optional[str]


class Removed(Event, tag="BlockRemoved"):
    block_hashes: list[int]
    medium: Optional[str]


ENCODER = msgspec.msgpack.Encoder()


def engine_hash(parent, tokens):
    h = hashlib.sha256(struct.pack("<Q", parent or 0) + struct.pack(f"<{len(tokens)}I", *tokens))
    return int.from_bytes(h.digest()[:8], "little")


class Engine:
    def __init__(self, args):
        self.args = args
        self.tok = PreTrainedTokenizerFast(tokenizer_file=args.tokenizer,
                                           bos_token=args.bos or None, eos_token=args.eos or None)
        with open(args.template, encoding="utf-8") as f:
            self.template = f.read()
        self.lock = threading.Lock()
        # The scheduler sees requests in arrival order (tickets taken as each body is read),
        # though they are rendered in parallel, as vLLM's frontend does.
        self.turn = threading.Condition()
        self.next_ticket = 0
        self.serving = 0
        self.cache = collections.OrderedDict()  # engine hash -> None, LRU first
        self.seq = 0
        self.buffer = collections.deque(maxlen=10000)
        ctx = zmq.Context.instance()
        self.pub = ctx.socket(zmq.PUB)
        self.pub.bind(f"tcp://127.0.0.1:{args.kv_port}")
        self.router = ctx.socket(zmq.ROUTER)
        self.router.bind(f"tcp://127.0.0.1:{args.replay_port}")
        threading.Thread(target=self.serve_replays, daemon=True).start()

    def tokens(self, body, chat):
        if not chat:
            return self.tok.encode(body["prompt"], add_special_tokens=True)
        messages, tools = prepare(body)
        cont = body.get("continue_final_message", False)
        text = self.tok.apply_chat_template(
            messages, tools=tools, documents=body.get("documents"), chat_template=self.template,
            add_generation_prompt=body.get("add_generation_prompt", not cont),
            continue_final_message=cont, tokenize=False, **body.get("chat_template_kwargs", {}))
        return self.tok.encode(text, add_special_tokens=False)

    def ticket(self):
        with self.turn:
            t = self.next_ticket
            self.next_ticket += 1
            return t

    def in_order(self, ticket, work):
        """Runs `work` once every earlier ticket has run (or failed)."""
        with self.turn:
            self.turn.wait_for(lambda: self.serving == ticket)
        try:
            return work()
        finally:
            with self.turn:
                self.serving += 1
                self.turn.notify_all()

    def admit(self, ids):
        """Matches, stores and touches the prompt's full blocks; returns the cached tokens."""
        bs = self.args.block_size
        full = len(ids) // bs
        hashes, parent = [], None
        for b in range(full):
            parent = engine_hash(parent, ids[b * bs:(b + 1) * bs])
            hashes.append(parent)
        with self.lock:
            hit = 0
            limit = (len(ids) - 1) // bs
            while hit < min(full, limit) and hashes[hit] in self.cache:
                hit += 1
            new = [b for b in range(full) if hashes[b] not in self.cache]
            events = []
            if new:
                first = new[0]
                events.append(Stored(
                    block_hashes=hashes[first:], parent_block_hash=hashes[first - 1] if first else None,
                    token_ids=ids[first * bs:full * bs], block_size=bs, lora_id=None, medium="GPU"))
            for h in reversed(hashes):
                self.cache[h] = None
                self.cache.move_to_end(h)
            evicted = []
            while len(self.cache) > self.args.capacity_blocks:
                h, _ = self.cache.popitem(last=False)
                evicted.append(h)
            if evicted:
                events.append(Removed(block_hashes=evicted, medium="GPU"))
            if events:
                self.publish(events)
        return hit * bs

    def publish(self, events):
        payload = ENCODER.encode(Batch(ts=time.time(), events=events, data_parallel_rank=0))
        seq = self.seq
        self.seq += 1
        self.buffer.append((seq, payload))
        self.pub.send_multipart([self.args.topic.encode(), struct.pack(">q", seq), payload])

    def serve_replays(self):
        while True:
            frames = self.router.recv_multipart()
            client, start = frames[0], struct.unpack(">q", frames[-1])[0]
            with self.lock:
                due = [(s, p) for s, p in self.buffer if s >= start]
            for s, p in due:
                self.router.send_multipart([client, b"", struct.pack(">q", s), p])
            self.router.send_multipart([client, b"", struct.pack(">q", -1), b""])


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    engine: Engine = None

    def log_message(self, *a):
        pass

    def send(self, status, body, ctype="application/json"):
        self.send_response(status)
        self.send_header("content-type", ctype)
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self):
        if self.path == "/v1/models":
            m = self.engine.args.model
            self.send(200, json.dumps({"object": "list", "data": [{"id": m, "object": "model"}]}).encode())
        elif self.path in ("/health", "/metrics"):
            self.send(200, b"", "text/plain")
        else:
            self.send(404, b'{"error": "not found"}')

    def do_POST(self):
        n = int(self.headers.get("content-length", "0"))
        body = json.loads(self.rfile.read(n))
        chat = self.path == "/v1/chat/completions"
        if not chat and self.path != "/v1/completions":
            self.send(404, b'{"error": "not found"}')
            return
        ticket = self.engine.ticket()
        try:
            ids = self.engine.tokens(body, chat)
        except Exception as e:  # a chat the template refuses: vLLM answers 400
            self.engine.in_order(ticket, lambda: None)
            self.send(400, json.dumps({"error": {"message": str(e)[:200], "type": "BadRequestError"}}).encode())
            return
        cached = self.engine.in_order(ticket, lambda: self.engine.admit(ids))
        usage = {"prompt_tokens": len(ids), "completion_tokens": 1, "total_tokens": len(ids) + 1,
                 "prompt_tokens_details": {"cached_tokens": cached}}
        if self.engine.args.log:
            with open(self.engine.args.log, "a", encoding="utf-8") as f:
                f.write(json.dumps({"ticket": ticket, "prompt_tokens": len(ids), "cached_tokens": cached,
                                    "t": time.time(), "first": ids[:4], "tail": ids[-4:]}) + "\n")
        obj = "chat.completion" if chat else "text_completion"
        if chat:
            choice = {"index": 0, "message": {"role": "assistant", "content": "ok"}, "finish_reason": "stop"}
            delta = {"index": 0, "delta": {"role": "assistant", "content": "ok"}, "finish_reason": None}
            end = {"index": 0, "delta": {}, "finish_reason": "stop"}
        else:
            choice = {"index": 0, "text": "ok", "finish_reason": "stop"}
            delta = {"index": 0, "text": "ok", "finish_reason": None}
            end = {"index": 0, "text": "", "finish_reason": "stop"}
        head = {"id": "cmpl-mock", "created": int(time.time()), "model": body.get("model", "")}
        if not body.get("stream"):
            self.send(200, json.dumps({**head, "object": obj, "choices": [choice], "usage": usage}).encode())
            return
        chunk = obj + ".chunk" if chat else obj
        events = [{**head, "object": chunk, "choices": [delta]}, {**head, "object": chunk, "choices": [end]}]
        if (body.get("stream_options") or {}).get("include_usage"):
            events.append({**head, "object": chunk, "choices": [], "usage": usage})
        sse = "".join(f"data: {json.dumps(e)}\n\n" for e in events) + "data: [DONE]\n\n"
        self.send(200, sse.encode(), "text/event-stream")


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--kv-port", type=int, required=True)
    p.add_argument("--replay-port", type=int, required=True)
    p.add_argument("--tokenizer", required=True)
    p.add_argument("--template", required=True)
    p.add_argument("--bos", default="")
    p.add_argument("--eos", default="")
    p.add_argument("--model", default="mock")
    p.add_argument("--topic", default="kv-events")
    p.add_argument("--block-size", type=int, default=16)
    p.add_argument("--capacity-blocks", type=int, default=1 << 20)
    p.add_argument("--log", default="")
    args = p.parse_args()
    Handler.engine = Engine(args)
    # socketserver's listen backlog is 5: the gateway opening more connections at once would
    # see SYNs dropped and retried a second later.
    ThreadingHTTPServer.request_queue_size = 128
    server = ThreadingHTTPServer(("127.0.0.1", args.port), Handler)
    server.daemon_threads = True
    print("ready", flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()

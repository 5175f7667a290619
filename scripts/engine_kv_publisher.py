#!/usr/bin/env python3
"""Runs vLLM's or SGLang's own KV event publisher over ZeroMQ, driven line by line.

The engine's module (`vllm/distributed/kv_events.py`, `sglang/srt/disaggregation/kv_events.py`)
comes from its published wheel, extracted by scripts/engine-kv-events.sh into
DIR/<engine>-<version>/. It is loaded unchanged: its `ZmqEventPublisher` binds the PUB socket
and the replay ROUTER, numbers the batches, encodes them with msgspec and serves replays from
its buffer; its `KVEventBatch`, `BlockStored`, `BlockRemoved` and `AllBlocksCleared` structs
make every payload. gateway/tests/kv_events_engines follows what it publishes.

Stubbed (package internals the module imports but the publisher path does not use, so the
driver needs neither torch nor the rest of the engine):
  vLLM   vllm.logger.init_logger          -> logging.getLogger
         vllm.config(.kv_events).KVEventsConfig -> a dataclass with the same fields (the real
                                             one is a pydantic config; only 0.34 builds one)
         vllm.v1.core.kv_cache_utils.ExternalBlockHash -> bytes | int (its definition there)
         vllm.utils.network_utils.{get_ip, get_tcp_uri, is_valid_ipv6_address,
                                   split_zmq_path} -> raise (used only for `tcp://*:0`)
  SGLang 0.5.23: sglang.srt.runtime_context.get_parallel and
         sglang.srt.utils.network.NetworkAddress -> raise (used only to pick and advertise
         publisher ports, which the driver does not call)
  SGLang 0.4.9 and 0.5.9 import nothing of their package (pydantic is a real dependency).

What the engine's scheduler would decide is scripted: the blocks stored and removed, and
their engine hashes (a SHA-256 chain over parent and tokens, in each version's hash type:
signed 64-bit for vLLM 0.9 and SGLang, u64 for vLLM 0.11 (`maybe_convert_block_hash`), 32
bytes for vLLM 0.34). vLLM reports a store of several blocks as one `BlockStored`; SGLang as
one per page, chained through `parent_block_hash`.

Protocol: one JSON object per line on stdout, commands one per line on stdin.
  start-up  -> {"endpoint": "tcp://127.0.0.1:P", "replay_endpoint": "tcp://127.0.0.1:R"}
  {"op": "store", "prefix": [tokens], "tokens": [tokens], "lose": false} -> {"seq": N}
      the full blocks `tokens` cached after the (already cached) blocks `prefix`
  {"op": "remove", "prefix": [tokens], "tokens": [tokens], "lose": false} -> {"seq": N}
  {"op": "clear"} / {"op": "empty"} (also take "lose")                  -> {"seq": N}
  {"op": "quit"} -> {"quit": true}, then the publisher shuts down and the process exits
"lose": the batch is numbered, buffered for replay and not sent on the PUB socket (a message
the network lost: a fault injected around the engine's socket, not in its code). A reply
comes once the publisher thread has sent (or lost) the batch.

Usage: engine_kv_publisher.py --engine vllm --version 0.9.2 --dir DIR [--pub-port P
  --replay-port R] [--topic T] [--buffer-steps N]. Ports 0 (the default): free ones. The
sockets bind `tcp://*:PORT` (both engines bind only an endpoint with `*`).
"""

import argparse
import atexit
import dataclasses
import hashlib
import importlib.util
import json
import logging
import socket
import sys
import threading
import time
import types
from typing import Optional, Union

BLOCK = 16
MODULES = {
    "vllm": "vllm/distributed/kv_events.py",
    "sglang": "sglang/srt/disaggregation/kv_events.py",
}


def stub(name: str, **attrs) -> types.ModuleType:
    module = sys.modules.get(name) or types.ModuleType(name)
    module.__dict__.update(attrs)
    sys.modules[name] = module
    return module


def unused(what: str):
    def fail(*_args, **_kwargs):
        raise NotImplementedError(f"{what} is stubbed: the driver never calls it")

    return fail


@dataclasses.dataclass
class KVEventsConfig:
    """vLLM's `KVEventsConfig` fields (`vllm/config/kv_events.py`)."""

    enable_kv_cache_events: bool = False
    publisher: str = "null"
    endpoint: str = "tcp://*:5557"
    replay_endpoint: Optional[str] = None
    buffer_steps: int = 10_000
    hwm: int = 100_000
    max_queue_size: int = 100_000
    topic: str = ""


def install_stubs(engine: str) -> None:
    if engine == "vllm":
        for pkg in ("vllm", "vllm.v1", "vllm.v1.core", "vllm.utils", "vllm.distributed"):
            stub(pkg, __path__=[])
        stub("vllm.logger", init_logger=logging.getLogger)
        stub("vllm.config", __path__=[], KVEventsConfig=KVEventsConfig)
        stub("vllm.config.kv_events", KVEventsConfig=KVEventsConfig)
        stub("vllm.v1.core.kv_cache_utils", ExternalBlockHash=Union[bytes, int])
        stub(
            "vllm.utils.network_utils",
            **{
                f: unused(f"vllm.utils.network_utils.{f}")
                for f in ("get_ip", "get_tcp_uri", "is_valid_ipv6_address", "split_zmq_path")
            },
        )
    else:
        for pkg in ("sglang", "sglang.srt", "sglang.srt.utils", "sglang.srt.disaggregation"):
            stub(pkg, __path__=[])
        stub("sglang.srt.runtime_context", get_parallel=unused("get_parallel"))
        stub("sglang.srt.utils.network", NetworkAddress=unused("NetworkAddress"))


def load(engine: str, version: str, root: str) -> types.ModuleType:
    install_stubs(engine)
    path = f"{root}/{engine}-{version}/{MODULES[engine]}"
    name = MODULES[engine][: -len(".py")].replace("/", ".")
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise SystemExit(f"cannot load {path}: run scripts/engine-kv-events.sh")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


class LossyPub:
    """The engine's PUB socket, with chosen sequence numbers not sent (lost on the way)."""

    def __init__(self, sock) -> None:
        self._sock = sock
        self.lose: set[int] = set()
        self.done = 0
        self._cv = threading.Condition()

    def send_multipart(self, frames, *args, **kwargs):
        seq = int.from_bytes(frames[1], "big")
        if seq not in self.lose:
            self._sock.send_multipart(frames, *args, **kwargs)
        with self._cv:
            self.done = seq + 1
            self._cv.notify_all()

    def wait(self, count: int, timeout: float = 30.0) -> None:
        with self._cv:
            if not self._cv.wait_for(lambda: self.done >= count, timeout):
                raise SystemExit(f"the publisher thread did not send batch {count - 1}")

    def __getattr__(self, name):
        return getattr(self._sock, name)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("0.0.0.0", 0))
        return s.getsockname()[1]


def start_publisher(kv, args):
    """The engine's `ZmqEventPublisher` on the given ports (or free ones), retried while a
    port is still held (a restarted engine's previous process) or was taken meanwhile."""
    import zmq

    deadline = time.monotonic() + 20
    while True:
        pub_port = args.pub_port or free_port()
        replay_port = args.replay_port or free_port()
        try:
            publisher = kv.ZmqEventPublisher(
                0,
                endpoint=f"tcp://*:{pub_port}",
                replay_endpoint=f"tcp://*:{replay_port}",
                buffer_steps=args.buffer_steps,
                topic=args.topic,
            )
            return publisher, pub_port, replay_port
        except zmq.ZMQError as e:
            if time.monotonic() > deadline:
                raise SystemExit(f"cannot bind ports {pub_port}, {replay_port}: {e}")
            time.sleep(0.05)


class Engine:
    """Engine hashes and events in one version's structs."""

    def __init__(self, kv, engine: str, version: str) -> None:
        self.kv = kv
        self.engine = engine
        self.version = version
        self.fields = set(kv.BlockStored.__struct_fields__)

    def hash(self, parent: Optional[bytes], block: list[int]) -> tuple[bytes, object]:
        h = hashlib.sha256((parent or b"root") + b"".join(t.to_bytes(4, "little") for t in block))
        raw = h.digest()
        if self.engine == "vllm" and self.version.startswith("0.11"):
            return raw, int.from_bytes(raw, "big") & ((1 << 64) - 1)
        if self.engine == "vllm" and not self.version.startswith("0.9"):
            return raw, raw
        return raw, int.from_bytes(raw[:8], "big", signed=True)

    def chain(self, prefix: list[int], tokens: list[int]) -> tuple[object, list[object]]:
        """(engine hash of the prefix's last block or None, engine hashes of `tokens`)."""
        assert len(prefix) % BLOCK == 0 and len(tokens) % BLOCK == 0, "full blocks only"
        raw, parent = None, None
        for i in range(0, len(prefix), BLOCK):
            raw, parent = self.hash(raw, prefix[i : i + BLOCK])
        hashes = []
        for i in range(0, len(tokens), BLOCK):
            raw, h = self.hash(raw, tokens[i : i + BLOCK])
            hashes.append(h)
        return parent, hashes

    def stored(self, parent, hashes, tokens) -> object:
        values = {
            "block_hashes": hashes,
            "parent_block_hash": parent,
            "token_ids": tokens,
            "block_size": BLOCK,
            "lora_id": None,
            "medium": "GPU",
            "lora_name": None,
        }
        return self.kv.BlockStored(**{k: v for k, v in values.items() if k in self.fields})

    def removed(self, hashes) -> object:
        fields = set(self.kv.BlockRemoved.__struct_fields__)
        values = {"block_hashes": hashes, "medium": "GPU"}
        return self.kv.BlockRemoved(**{k: v for k, v in values.items() if k in fields})

    def events(self, cmd: dict) -> list:
        op = cmd["op"]
        if op == "empty":
            return []
        if op == "clear":
            return [self.kv.AllBlocksCleared()]
        parent, hashes = self.chain(cmd.get("prefix", []), cmd["tokens"])
        tokens = cmd["tokens"]
        if op == "store" and self.engine == "vllm":
            return [self.stored(parent, hashes, tokens)]
        if op == "store":
            out = []
            for i, h in enumerate(hashes):
                out.append(self.stored(parent, [h], tokens[i * BLOCK : (i + 1) * BLOCK]))
                parent = h
            return out
        if op == "remove" and self.engine == "vllm":
            return [self.removed(hashes)]
        if op == "remove":
            return [self.removed([h]) for h in reversed(hashes)]
        raise SystemExit(f"unknown op {op!r}")


def reply(obj: dict) -> None:
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--engine", choices=sorted(MODULES), required=True)
    ap.add_argument("--version", required=True)
    ap.add_argument("--dir", required=True, help="the folder engine-kv-events.sh printed")
    ap.add_argument("--pub-port", type=int, default=0)
    ap.add_argument("--replay-port", type=int, default=0)
    ap.add_argument("--topic", default="kv-events")
    ap.add_argument("--buffer-steps", type=int, default=10_000)
    args = ap.parse_args()
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr)

    kv = load(args.engine, args.version, args.dir)
    engine = Engine(kv, args.engine, args.version)
    publisher, pub_port, replay_port = start_publisher(kv, args)
    lossy = LossyPub(publisher._pub)
    publisher._pub = lossy
    reply(
        {
            "endpoint": f"tcp://127.0.0.1:{pub_port}",
            "replay_endpoint": f"tcp://127.0.0.1:{replay_port}",
        }
    )
    seq = 0
    for line in sys.stdin:
        cmd = json.loads(line)
        if cmd["op"] == "quit":
            break
        if cmd.get("lose"):
            lossy.lose.add(seq)
        publisher.publish(kv.KVEventBatch(ts=time.time(), events=engine.events(cmd)))
        seq += 1
        lossy.wait(seq)
        reply({"seq": seq - 1})
    publisher.shutdown()
    # SGLang registers `shutdown` with atexit too; a second one would wait for a dead thread.
    atexit.unregister(publisher.shutdown)
    reply({"quit": True})


if __name__ == "__main__":
    main()

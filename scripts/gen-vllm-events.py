#!/usr/bin/env python3
"""Golden KV event payloads for gateway/src/engines/kv_events, written by the real msgspec.

The structs below are written from the field lists of vLLM's
`vllm/distributed/kv_events.py` (an old and a new version) and SGLang's
`python/sglang/srt/disaggregation/kv_events.py`; they encode what those engines put on the
wire. Each payload (one `EventBatch`) goes to
`gateway/tests/fixtures/vllm_events/<variant>/<name>.hex` as one line of hex. The Rust tests
decode those exact bytes, so they need neither Python nor msgspec; rerun this script
(`pip install msgspec`, then `python3 scripts/gen-vllm-events.py`) only to change them.

Variants:
  vllm_v1        array-like, oldest vLLM: BlockStored without `medium`, int hashes.
  vllm_v2        array-like with `medium` and `data_parallel_rank`, u64 hashes above 2^63.
  vllm_v3_array  array-like with every newer field, bytes hashes.
  vllm_v3        maps (newest vLLM), bytes hashes, `group_idx`, `kv_cache_spec_kind`.
  sglang         array-like as SGLang: one hash per page, negative 64-bit hashes, and a
                 trailing partial page.

Scenario (tests read the same constants): tokens A = 1000..1063 (four 16-token blocks),
C = 5000..5031 (two blocks); hash H(k) of engine block k depends on the variant.
  stored_a    blocks 1, 2 (A[0:32]) at the root
  stored_b    blocks 3, 4 (A[32:64]) after block 2
  removed_b4  block 4 removed
  cleared     everything cleared
  stored_c    blocks 5, 6 (C) at the root
  skips       events the gateway must skip (LoRA, block size 32, unknown parent, ...)
  empty       a batch without events
"""

import pathlib
from typing import Any, Optional, Union

import msgspec

ROOT = pathlib.Path(__file__).resolve().parent.parent
OUT = ROOT / "gateway" / "tests" / "fixtures" / "vllm_events"

A = list(range(1000, 1064))
C = list(range(5000, 5032))
TS = 1764750000.25

# ---------------------------------------------------------------- structs, per variant


class BatchV1(msgspec.Struct, array_like=True, omit_defaults=True, gc=False):
    ts: float
    events: list[Any]


class EventV1(msgspec.Struct, array_like=True, omit_defaults=True, gc=False, tag=True):
    pass


class StoredV1(EventV1, tag="BlockStored"):
    block_hashes: list[int]
    parent_block_hash: Optional[int]
    token_ids: list[int]
    block_size: int
    lora_id: Optional[int]


class RemovedV1(EventV1, tag="BlockRemoved"):
    block_hashes: list[int]


class ClearedV1(EventV1, tag="AllBlocksCleared"):
    pass


class BatchV2(msgspec.Struct, array_like=True, omit_defaults=True, gc=False):
    ts: float
    events: list[Any]
    data_parallel_rank: Optional[int] = None


class EventV2(msgspec.Struct, array_like=True, omit_defaults=True, gc=False, tag=True):
    pass


class StoredV2(EventV2, tag="BlockStored"):
    block_hashes: list[int]
    parent_block_hash: Optional[int]
    token_ids: list[int]
    block_size: int
    lora_id: Optional[int]
    medium: Optional[str]


class RemovedV2(EventV2, tag="BlockRemoved"):
    block_hashes: list[int]
    medium: Optional[str]


class ClearedV2(EventV2, tag="AllBlocksCleared"):
    pass


def v3_structs(array_like: bool):
    """The newest field lists, as maps (vLLM today) or array-like."""

    class Batch(msgspec.Struct, array_like=array_like, omit_defaults=True, gc=False):
        ts: float
        events: list[Any]
        data_parallel_rank: Optional[int] = None

    class Event(msgspec.Struct, array_like=array_like, omit_defaults=True, gc=False, tag=True):
        pass

    class Stored(Event, tag="BlockStored"):
        block_hashes: list[Union[bytes, int]]
        parent_block_hash: Union[bytes, int, None]
        token_ids: list[int]
        block_size: int
        lora_id: Optional[int]
        medium: Optional[str]
        lora_name: Optional[str]
        extra_keys: Optional[list[Optional[tuple[Any, ...]]]] = None
        group_idx: Optional[int] = None
        kv_cache_spec_kind: Optional[str] = None
        kv_cache_spec_sliding_window: Optional[int] = None

    class Removed(Event, tag="BlockRemoved"):
        block_hashes: list[Union[bytes, int]]
        medium: Optional[str]
        group_idx: Optional[int] = None

    class Cleared(Event, tag="AllBlocksCleared"):
        pass

    return Batch, Stored, Removed, Cleared


# ---------------------------------------------------------------- scenarios


def old_style(H, Stored, Removed, Cleared, batch, medium: bool, per_page: bool):
    """vllm_v1, vllm_v2 and sglang: positional structs with 5 or 6 BlockStored fields."""
    m = {"medium": "GPU"} if medium else {}

    def stored(keys, parent, tokens, block_size=16, lora_id=None, **kw):
        kw = {**m, **kw}
        if not per_page:
            return [Stored(block_hashes=[H(k) for k in keys], parent_block_hash=parent,
                           token_ids=tokens, block_size=block_size, lora_id=lora_id, **kw)]
        out = []
        for i, k in enumerate(keys):
            page = tokens[16 * i: 16 * i + 16]
            out.append(Stored(block_hashes=[H(k)], parent_block_hash=parent, token_ids=page,
                              block_size=len(page), lora_id=lora_id, **kw))
            parent = H(k)
        return out

    skips = stored([7], None, A[0:16], lora_id=7)
    # An engine running 32-token blocks (one block, so SGLang's paging does not split it).
    skips.append(Stored(block_hashes=[H(8)], parent_block_hash=None, token_ids=A[0:32],
                        block_size=32, lora_id=None, **m))
    skips += stored([10], H(99), A[0:16])
    if per_page:
        # SGLang's trailing partial page: block_size is the page's length.
        skips.append(Stored(block_hashes=[H(9)], parent_block_hash=H(4), token_ids=A[0:5],
                            block_size=5, lora_id=None))
    if medium:
        skips.append(Removed(block_hashes=[H(1)], medium="CPU"))
    return {
        "stored_a": batch(stored([1, 2], None, A[0:32])),
        "stored_b": batch(stored([3, 4], H(2), A[32:64])),
        "removed_b4": batch([Removed(block_hashes=[H(4)], **m)]),
        "cleared": batch([Cleared()]),
        "stored_c": batch(stored([5, 6], None, C)),
        "skips": batch(skips),
        "empty": batch([]),
    }


def new_style(H, Stored, Removed, Cleared, batch):
    """vllm_v3 and vllm_v3_array: every newer field."""

    def stored(keys, parent, tokens, block_size=16, **kw):
        base = dict(lora_id=None, medium="GPU", lora_name=None, group_idx=0,
                    kv_cache_spec_kind="full_attention")
        base.update(kw)
        return Stored(block_hashes=[H(k) for k in keys], parent_block_hash=parent,
                      token_ids=tokens, block_size=block_size, **base)

    return {
        "stored_a": batch([stored([1, 2], None, A[0:32], extra_keys=[None, None])]),
        "stored_b": batch([stored([3, 4], H(2), A[32:64])]),
        "removed_b4": batch([Removed(block_hashes=[H(4)], medium="GPU", group_idx=0)]),
        "cleared": batch([Cleared()]),
        "stored_c": batch([stored([5, 6], None, C)]),
        "empty": batch([]),
        "skips": batch([
            stored([7], None, A[0:16], lora_id=7, lora_name="adapter-7"),
            stored([8], None, A[0:32], block_size=32),
            stored([10], H(99), A[0:16]),
            stored([11], None, A[0:16], extra_keys=[("salt-x",)]),
            stored([12], None, A[0:16], group_idx=1, kv_cache_spec_kind="sliding_window",
                   kv_cache_spec_sliding_window=128),
            Removed(block_hashes=[H(1)], medium="CPU"),
        ]),
    }


def main():
    enc = msgspec.msgpack.Encoder()
    variants = {}

    variants["vllm_v1"] = old_style(
        lambda k: k * 1_000_003, StoredV1, RemovedV1, ClearedV1,
        lambda evs: BatchV1(ts=TS, events=evs), medium=False, per_page=False)
    variants["vllm_v2"] = old_style(
        lambda k: 0xF000_0000_0000_0000 + k, StoredV2, RemovedV2, ClearedV2,
        lambda evs: BatchV2(ts=TS, events=evs, data_parallel_rank=0), medium=True,
        per_page=False)
    variants["sglang"] = old_style(
        lambda k: -(k * 1_000_000_007), StoredV1, RemovedV1, ClearedV1,
        lambda evs: BatchV1(ts=TS, events=evs), medium=False, per_page=True)
    for name, array_like in (("vllm_v3", False), ("vllm_v3_array", True)):
        Batch, Stored, Removed, Cleared = v3_structs(array_like)
        variants[name] = new_style(
            lambda k: bytes([k]) * 32, Stored, Removed, Cleared,
            lambda evs, Batch=Batch: Batch(ts=TS, events=evs, data_parallel_rank=1))

    for variant, payloads in variants.items():
        d = OUT / variant
        d.mkdir(parents=True, exist_ok=True)
        for name, batch in payloads.items():
            (d / f"{name}.hex").write_text(enc.encode(batch).hex() + "\n")
    print(f"wrote {sum(len(p) for p in variants.values())} payloads under {OUT}")


if __name__ == "__main__":
    main()

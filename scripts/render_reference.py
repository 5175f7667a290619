#!/usr/bin/env python3
"""Reference prompts for text/tests/render_reference.rs.

Generates a seeded corpus of agent chat requests (OpenAI bodies: system prompts, tools with
nested JSON-schema parameters, parallel tool calls, tool results, multi-turn, non-ASCII,
content parts, chat_template_kwargs, continue_final_message) and, for every family given,
the token ids the engine computes: vLLM's message preparation (mirrored in `prepare`,
from vllm/entrypoints/chat_utils.py `_postprocess_messages` and `_parse_chat_message_content`,
and serving_chat's `tool.model_dump()`), then `transformers`' `apply_chat_template`
(tokenize=False) and `encode(add_special_tokens=False)`, as vLLM does for chat requests.

usage: render_reference.py OUT.json FAMILY=TOKENIZER_JSON,TEMPLATE,BOS,EOS ...
"""
import copy
import json
import random
import sys

from transformers import PreTrainedTokenizerFast

N = 220
SEED = 40

SYSTEMS = [
    "You are a meticulous coding agent. Use the tools to inspect the repository before answering.",
    "Tu es un assistant de voyage. Réponds en français et vérifie la météo avant de proposer un itinéraire.",
    "あなたは在庫管理エージェントです。ツールを使って在庫を確認してください。",
    "You are an SRE on call. Investigate alerts step by step; never restart production without approval.\n\n"
    + "Runbook:\n" + "\n".join(f"{i}. Check dashboard panel {i} for anomalies." for i in range(1, 25)),
    "Du bist ein hilfreicher Assistent für Finanzfragen. Beträge immer in € angeben.",
]

TOOLS = [
    {"type": "function", "function": {"name": "get_weather", "description": "Current weather for a city.",
     "parameters": {"type": "object", "properties": {
         "city": {"type": "string", "description": "City name, e.g. Zürich"},
         "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]}}, "required": ["city"]}}},
    {"type": "function", "function": {"name": "search_code", "description": "Search the repository.",
     "parameters": {"type": "object", "properties": {
         "query": {"type": "string"},
         "filters": {"type": "object", "properties": {
             "languages": {"type": "array", "items": {"type": "string"}},
             "max_results": {"type": "integer", "minimum": 1, "maximum": 50},
             "score_threshold": {"type": "number", "minimum": 0.25}}}},
         "required": ["query"]}}},
    {"type": "function", "function": {"name": "run_shell", "description": "Run a shell command in the sandbox.",
     "parameters": {"type": "object", "properties": {
         "cmd": {"type": "string"}, "timeout_s": {"type": "number"},
         "env": {"type": "object", "additionalProperties": {"type": "string"}}}, "required": ["cmd"]}}},
    {"type": "function", "function": {"name": "create_order", "description": "Créer une commande.",
     "parameters": {"type": "object", "properties": {
         "items": {"type": "array", "items": {"type": "object", "properties": {
             "sku": {"type": "string"}, "qty": {"type": "integer"}}, "required": ["sku", "qty"]}},
         "express": {"type": "boolean"}, "note": {"type": ["string", "null"]}}, "required": ["items"]}}},
    {"type": "function", "function": {"name": "lookup_user", "parameters": {"type": "object", "properties": {
        "user_id": {"type": "string"}}}}},
    {"type": "function", "function": {"name": "get_time", "description": "Current UTC time.",
     "parameters": {"type": "object", "properties": {}}}},
]

USER_TEXTS = [
    "What's the weather in Zürich and in 東京 right now?",
    "Find where the prefix index is rebuilt and explain it.",
    "Order two of SKU-118 and one of SKU-7, express please.",
    "The p99 latency alert fired on gateway-3. What happened?",
    "Wie viel kostet das insgesamt? Bitte mit Mehrwertsteuer.",
    "ok, and now summarise everything in three bullet points 🙂",
    "Who is user u-4411?",
]

ASSISTANT_TEXTS = [
    "Here is what I found: the index is rebuilt on every epoch change.",
    "Il fait 21 °C à Zürich et 28 °C à Tokyo.",
    "Order placed. Anything else?",
    "The alert was caused by a cold cache after the rollout.",
]


def args_for(name, rng):
    return {
        "get_weather": lambda: {"city": rng.choice(["Zürich", "東京", "Paris"]), "unit": "celsius"},
        "search_code": lambda: {"query": rng.choice(["rebuild_index", "fn route"]),
                                "filters": {"languages": ["rust"], "max_results": rng.randint(1, 20),
                                            "score_threshold": 0.5}},
        "run_shell": lambda: {"cmd": "grep -rn 'epoch' gateway/src | head", "timeout_s": 2.5,
                              "env": {"LANG": "C.UTF-8"}},
        "create_order": lambda: {"items": [{"sku": "SKU-118", "qty": 2}, {"sku": "SKU-7", "qty": 1}],
                                 "express": True, "note": None},
        "lookup_user": lambda: {"user_id": "u-4411"},
        "get_time": lambda: {},
    }[name]()


def result_for(name, rng):
    if rng.random() < 0.5:
        return json.dumps({"ok": True, "tool": name, "value": rng.randint(0, 999), "unit": "°C"},
                          ensure_ascii=False)
    return f"{name} returned {rng.randint(0, 99)} rows\nrow 1: ✓ done"


def call_id(rng):
    return "".join(rng.choice("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789") for _ in range(9))


def text_or_parts(text, rng):
    if rng.random() < 0.15:
        half = len(text) // 2
        return [{"type": "text", "text": text[:half]}, {"type": "text", "text": text[half:]}]
    return text


def conversation(i, rng):
    body = {"model": "m", "messages": []}
    msgs = body["messages"]
    if rng.random() < 0.85:
        msgs.append({"role": "system", "content": text_or_parts(rng.choice(SYSTEMS), rng)})
    tools = rng.sample(TOOLS, rng.randint(1, 4)) if rng.random() < 0.9 else []
    if tools:
        body["tools"] = copy.deepcopy(tools)
    for _turn in range(rng.randint(1, 3)):
        msgs.append({"role": "user", "content": text_or_parts(rng.choice(USER_TEXTS), rng)})
        if tools:
            for _step in range(rng.randint(0, 2)):
                calls = rng.sample(tools, min(len(tools), rng.choice([1, 1, 1, 2, 3])))
                tcs = []
                for t in calls:
                    name = t["function"]["name"]
                    args = args_for(name, rng)
                    arguments = json.dumps(args, ensure_ascii=rng.random() < 0.3)
                    tcs.append({"id": call_id(rng), "type": "function",
                                "function": {"name": name, "arguments": arguments}})
                content = rng.choice([None, None, "", "Let me check."])
                msgs.append({"role": "assistant", "content": content, "tool_calls": tcs})
                for tc in tcs:
                    msgs.append({"role": "tool", "tool_call_id": tc["id"],
                                 "content": text_or_parts(result_for(tc["function"]["name"], rng), rng)})
        msgs.append({"role": "assistant", "content": rng.choice(ASSISTANT_TEXTS)})
    r = rng.random()
    if r < 0.1:
        msgs[-1]["content"] = "Partial answer: the cache"
        body["continue_final_message"] = True
        body["add_generation_prompt"] = False
    else:
        msgs.append({"role": "user", "content": rng.choice(USER_TEXTS)})
    if rng.random() < 0.3:
        body["chat_template_kwargs"] = {"enable_thinking": rng.random() < 0.5}
    if rng.random() < 0.2 and tools:
        body["tool_choice"] = "auto"
    return body


# --- vLLM's preparation (see the module doc) ---------------------------------------------

def content_text(c):
    if c is None:
        return ""
    if isinstance(c, str):
        return c
    return "\n".join(p["text"] for p in c if p.get("text") is not None)


def arguments(a):
    if isinstance(a, dict):
        return a
    if not a:
        return {}
    try:
        parsed = json.loads(a)
    except json.JSONDecodeError:
        return {}
    return parsed if isinstance(parsed, dict) else {}


def prepare(body):
    out = []
    for m in body["messages"]:
        msg = {"role": m["role"], "content": content_text(m.get("content"))}
        if m["role"] == "assistant" and m.get("tool_calls") is not None and len(m["tool_calls"]) > 0:
            calls = copy.deepcopy(m["tool_calls"])
            for c in calls:
                c["function"]["arguments"] = arguments(c["function"].get("arguments"))
            msg["tool_calls"] = calls
        if m["role"] == "tool" and "tool_call_id" in m:
            msg["tool_call_id"] = m["tool_call_id"]
        for k in ("name", "reasoning_content", "reasoning"):
            if isinstance(m.get(k), str):
                msg[k] = m[k]
        out.append(msg)
    tools = None
    if body.get("tools") is not None:
        tools = []
        for t in body["tools"]:
            f = t["function"]
            fn = {"name": f["name"], "description": f.get("description"), "parameters": f.get("parameters")}
            fn.update({k: v for k, v in f.items() if k not in fn})
            dumped = {"type": "function", "function": fn}
            dumped.update({k: v for k, v in t.items() if k not in dumped})
            tools.append(dumped)
    return out, tools


def main():
    out_path = sys.argv[1]
    rng = random.Random(SEED)
    corpus = [conversation(i, rng) for i in range(N)]
    families = {}
    for arg in sys.argv[2:]:
        name, spec = arg.split("=", 1)
        tok_file, template_file, bos, eos = spec.split(",")
        tok = PreTrainedTokenizerFast(tokenizer_file=tok_file, bos_token=bos or None, eos_token=eos or None)
        template = open(template_file, encoding="utf-8").read()
        expected = []
        for body in corpus:
            messages, tools = prepare(body)
            cont = body.get("continue_final_message", False)
            try:
                text = tok.apply_chat_template(
                    messages, tools=tools, documents=body.get("documents"), chat_template=template,
                    add_generation_prompt=body.get("add_generation_prompt", not cont),
                    continue_final_message=cont, tokenize=False,
                    **body.get("chat_template_kwargs", {}))
            except Exception as e:  # the template refused the chat: Warmpath must refuse it too
                expected.append({"error": str(e)[:200]})
                continue
            expected.append({"ids": tok.encode(text, add_special_tokens=False), "text": text})
        families[name] = expected
    with open(out_path, "w", encoding="utf-8") as f:
        # Each body as a JSON string: a reader without ordered maps keeps its key order.
        bodies = [json.dumps(b, ensure_ascii=False) for b in corpus]
        json.dump({"corpus": bodies, "families": families}, f, ensure_ascii=False)


if __name__ == "__main__":
    main()

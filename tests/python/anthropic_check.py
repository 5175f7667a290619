"""Drives the gateway's /v1/messages with the official Anthropic Python SDK; prints one
JSON line of results.

Usage: anthropic_check.py BASE_URL API_KEY MODEL
"""
import json
import sys

import anthropic
from anthropic import Anthropic

base_url, api_key, model = sys.argv[1], sys.argv[2], sys.argv[3]
# The SDK sends the key as `x-api-key` and an `anthropic-version` header.
client = Anthropic(base_url=base_url, api_key=api_key, max_retries=0, timeout=60)

system = "You are terse. " + "Warmpath routes by prefix. " * 40
messages = [{"role": "user", "content": "Say something."}]

plain = client.messages.create(
    model=model, max_tokens=6, system=system, messages=messages,
    extra_body={"temperature": 0}, metadata={"user_id": "e2e"},
)
repeat = client.messages.create(
    model=model, max_tokens=6, system=system, messages=messages,
    extra_body={"temperature": 0}, metadata={"user_id": "e2e"},
)

with client.messages.stream(
    model=model,
    max_tokens=6,
    system=[{"type": "text", "text": system}],
    messages=[{"role": "user", "content": [{"type": "text", "text": "Say something."}]}],
    extra_body={"temperature": 0},
) as stream:
    events = []
    text = ""
    for event in stream:
        events.append(event.type)
        if event.type == "text":
            text += event.text
    final = stream.get_final_message()

wrong_key = None
try:
    Anthropic(base_url=base_url, api_key="sk-wrong", max_retries=0).messages.create(
        model=model, max_tokens=4, messages=messages
    )
except anthropic.AuthenticationError as e:
    wrong_key = {"status": e.status_code, "type": e.body["error"]["type"]}

print(json.dumps({
    "plain": plain.model_dump(),
    "repeat_usage": repeat.usage.model_dump(),
    "stream_text": text,
    "stream_events": sorted(set(events)),
    "final": final.model_dump(),
    "wrong_key": wrong_key,
}))

"""Drives the gateway with the official OpenAI Python SDK; prints one JSON line of results.

Usage: sdk_check.py BASE_URL API_KEY MODEL
"""
import json
import sys

from openai import OpenAI

base_url, api_key, model = sys.argv[1], sys.argv[2], sys.argv[3]
client = OpenAI(base_url=base_url, api_key=api_key, max_retries=0, timeout=60)

models = [m.id for m in client.models.list()]
messages = [
    {"role": "system", "content": "You are terse."},
    {"role": "user", "content": "Say something."},
]
plain = client.chat.completions.create(model=model, messages=messages, max_tokens=4, temperature=0)
raw = client.chat.completions.with_raw_response.create(model=model, messages=messages, max_tokens=4, temperature=0)
chunks = []
stream = client.chat.completions.create(
    model=model, messages=messages, max_tokens=4, temperature=0, stream=True,
    stream_options={"include_usage": True},
)
usage = None
for chunk in stream:
    for choice in chunk.choices:
        if choice.delta.content:
            chunks.append(choice.delta.content)
    if chunk.usage is not None:
        usage = chunk.usage.prompt_tokens

print(json.dumps({
    "models": models,
    "plain_content": plain.choices[0].message.content,
    "plain_prompt_tokens": plain.usage.prompt_tokens,
    "replica_header": raw.headers.get("x-warmpath-replica"),
    "stream_chunks": len(chunks),
    "stream_prompt_tokens": usage,
}))

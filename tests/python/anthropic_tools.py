"""Tool use through the gateway's /v1/messages with the official Anthropic Python SDK;
prints one JSON line of results.

Usage: anthropic_tools.py BASE_URL API_KEY MODEL
"""
import json
import sys

from anthropic import Anthropic

base_url, api_key, model = sys.argv[1], sys.argv[2], sys.argv[3]
client = Anthropic(base_url=base_url, api_key=api_key, max_retries=0, timeout=60)

tools = [{
    "name": "lookup",
    "description": "Looks a word up.",
    "input_schema": {"type": "object", "properties": {"echo": {"type": "string"}}},
}]
question = [{"role": "user", "content": "Look up warm."}]

plain = client.messages.create(
    model=model, max_tokens=16, tools=tools, tool_choice={"type": "any"}, messages=question
)
with client.messages.stream(
    model=model, max_tokens=16, tools=tools, messages=question
) as stream:
    deltas = [e.type for e in stream]
    streamed = stream.get_final_message()

# The conversation goes on with the call and its result.
call = plain.content[0]
follow = client.messages.create(
    model=model,
    max_tokens=16,
    messages=question + [
        {"role": "assistant", "content": [call.model_dump(include={"type", "id", "name", "input"})]},
        {"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": call.id, "content": "warm: not cold"},
            {"type": "text", "text": "Thanks."},
        ]},
    ],
)

print(json.dumps({
    "plain": plain.model_dump(),
    "streamed": streamed.model_dump(),
    "stream_event_types": sorted(set(deltas)),
    "follow": follow.model_dump(),
}))

"""Drives the gateway's Responses API with the official OpenAI Python SDK; prints one JSON
line of results.

Usage: responses_check.py BASE_URL API_KEY MODEL

1. a plain `responses.create` (string input, instructions);
2. a streamed one (a list of input items), its events iterated;
3. the same through the SDK's `responses.stream` helper (it also moves the round-robin
   policy's next pick to the other replica);
4. a follow-up of (1) with `previous_response_id`;
5. an unknown `previous_response_id` (the SDK raises BadRequestError).
"""
import json
import sys

import openai
from openai import OpenAI

base_url, api_key, model = sys.argv[1], sys.argv[2], sys.argv[3]
client = OpenAI(base_url=base_url, api_key=api_key, max_retries=0, timeout=120)

# dummy:tiny is byte-level: ~600 tokens of instructions, many full blocks to reuse.
instructions = "You answer questions about the Warmpath gateway. " * 12


def usage_of(r):
    u = r.usage
    return {
        "input": u.input_tokens,
        "output": u.output_tokens,
        "total": u.total_tokens,
        "cached": u.input_tokens_details.cached_tokens,
    }


raw = client.responses.with_raw_response.create(
    model=model, instructions=instructions, input="What does it route by?",
    max_output_tokens=6, temperature=0,
)
first = raw.parse()
first_headers = {"replica": raw.headers.get("x-warmpath-replica"), "request_id": raw.headers.get("x-request-id")}

stream = client.responses.create(
    model=model, instructions=instructions,
    input=[{"type": "message", "role": "user", "content": [{"type": "input_text", "text": "Something else?"}]}],
    max_output_tokens=6, temperature=0, stream=True,
)
types, seqs, deltas, done_text, final = [], [], [], None, None
for ev in stream:
    types.append(ev.type)
    seqs.append(ev.sequence_number)
    if ev.type == "response.output_text.delta":
        deltas.append(ev.delta)
    elif ev.type == "response.output_text.done":
        done_text = ev.text
    elif ev.type in ("response.completed", "response.incomplete"):
        final = ev.response

# The SDK's stream helper rebuilds the response from the events as they come (it fails on
# an event naming an item or part it has not been told of). Its `get_final_response` wants
# `response.completed`; at the token bound the stream ends with `response.incomplete`, as
# OpenAI's does, so the last event's response is read instead.
with client.responses.stream(
    model=model, instructions=instructions, input="Third?", max_output_tokens=6, temperature=0,
) as helper:
    helper_deltas, helper_final = [], None
    for e in helper:
        if e.type == "response.output_text.delta":
            helper_deltas.append(e.delta)
        elif e.type in ("response.completed", "response.incomplete"):
            helper_final = e.response
    helper_deltas = "".join(helper_deltas)

raw = client.responses.with_raw_response.create(
    model=model, instructions=instructions, input="And how are replicas chosen?",
    previous_response_id=first.id, max_output_tokens=6, temperature=0,
)
follow = raw.parse()
follow_headers = {"replica": raw.headers.get("x-warmpath-replica"), "request_id": raw.headers.get("x-request-id")}

unknown = None
try:
    client.responses.create(model=model, input="x", previous_response_id="resp_never_made")
except openai.BadRequestError as e:
    unknown = {"status": e.status_code, "code": e.code, "param": e.param}

print(json.dumps({
    "first": {"id": first.id, "object": first.object, "status": first.status,
              "text": first.output_text, "item_types": [o.type for o in first.output],
              "usage": usage_of(first), **first_headers},
    "stream": {"types": types, "seqs": seqs, "deltas": "".join(deltas), "done_text": done_text,
               "final_status": final.status if final else None,
               "final_text": final.output_text if final else None,
               "usage": usage_of(final) if final and final.usage else None},
    "helper": {"deltas": helper_deltas, "final_text": helper_final.output_text,
               "status": helper_final.status},
    "follow": {"id": follow.id, "status": follow.status, "previous": follow.previous_response_id,
               "usage": usage_of(follow), **follow_headers},
    "unknown": unknown,
}))

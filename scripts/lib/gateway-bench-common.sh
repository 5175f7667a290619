# Shared by scripts/bench-gateway.sh and scripts/gateway-instructions.sh (source it): the
# benchmark tenant, the gateway config in front of one fixed-reply upstream, and the short
# and long chat bodies as wrk scripts.

KEY=sk-bench-key
SHORT='{"model":"fixed","max_tokens":16,"messages":[{"role":"system","content":"You are a helpful assistant."},{"role":"user","content":"Say hello in one word."}]}'

# write_gateway_yaml FILE LISTEN_PORT ADMIN_PORT UPSTREAM_PORT THREADS: auth, tenant limits
# (set high enough never to reject), tokenization, hashing and `warm` routing all on.
write_gateway_yaml() {
  local hash
  hash=$(printf %s "$KEY" | sha256sum | cut -d' ' -f1)
  cat > "$1" <<YAML
listen: 127.0.0.1:$2
admin_listen: 127.0.0.1:$3
threads: $5
replicas: [http://127.0.0.1:$4]
policy: {type: warm}
auth: {enabled: true, salt_secret: bench-salt-secret-0123456789}
tenants:
  - id: bench
    api_key_sha256: [$hash]
    models: ["*"]
    limits: {requests_per_minute: 100000000, request_burst: 1000000, tokens_per_minute: 1000000000000, max_concurrent: 10000}
admission: {max_in_flight_per_replica: 10000, max_queue: 10000}
health: {probe_interval_ms: 5000}
load_poll_ms: 1000
tokenizer: {cache_entries: 8192, min_cached_bytes: 1}
YAML
}

# write_short_lua FILE [BODY]: wrk posts BODY (default: the short chat) with the tenant's key.
write_short_lua() {
  cat > "$1" <<LUA
wrk.method = "POST"
wrk.body = '${2:-$SHORT}'
wrk.headers["Content-Type"] = "application/json"
wrk.headers["Authorization"] = "Bearer $KEY"
LUA
}

# write_stream_lua FILE: the short chat with `"stream":true` (the upstream answers in SSE).
write_stream_lua() {
  write_short_lua "$1" "${SHORT%\}}"',"stream":true}'
}

# write_long_lua FILE: wrk posts a long chat: the same 25 KB system prompt every time, plus a
# short user message that varies per request.
write_long_lua() {
  cat > "$1" <<LUA
-- About 25 KB of varied words and numbers (deterministic), identical in every request.
local words = {"the", "router", "keeps", "its", "cache", "warm", "while", "quick", "brown", "fox",
  "jumps", "over", "lazy", "dog", "prefix", "blocks", "hashed", "replicas", "serve", "tenants",
  "with", "care.", "Every", "request,", "token", "budget", "1234", "2048", "tokens;", "(often)"}
local parts, x, len = {}, 42, 0
while len < 25000 do
  x = (x * 16807) % 2147483647
  local w = words[(x % #words) + 1]
  parts[#parts + 1] = w
  len = len + #w + 1
end
local sys = table.concat(parts, " ")
local n = 0
local headers = { ["Content-Type"] = "application/json", ["Authorization"] = "Bearer $KEY" }
request = function()
  n = n + 1
  local body = '{"model":"fixed","max_tokens":16,"messages":[{"role":"system","content":"' .. sys ..
    '"},{"role":"user","content":"Question number ' .. n .. ': what is next?"}]}'
  return wrk.format("POST", "/v1/chat/completions", headers, body)
end
LUA
}

# tokenizer_spec OUT_FILE BIN_DIR PROFILE REPLICA_PORT: the tokenizer spec the fixed-reply
# upstream publishes. BENCH_SPEC names a spec saved earlier from
# `curl replica:PORT/v1/replica/tokenizer`; otherwise BENCH_TOKENIZER=smollm2 (the default)
# reads SmolLM2's from a short-lived `replica serve`, and BENCH_TOKENIZER=bytes leaves
# OUT_FILE absent (the upstream then publishes its byte-level fixture). Sets TOKENIZER_NAME.
tokenizer_spec() {
  local out=$1 bin=$2 profile=$3 port=$4 model rpid
  TOKENIZER_NAME="byte-level fixture (1 token per byte)"
  if [ -n "${BENCH_SPEC:-}" ]; then
    cp "$BENCH_SPEC" "$out"
    TOKENIZER_NAME="spec file $(basename "$BENCH_SPEC")"
  elif [ "${BENCH_TOKENIZER:-smollm2}" = smollm2 ]; then
    model=$(scripts/fetch-model.sh)
    cargo build --profile "$profile" -p replica --bin replica
    "$bin/replica" serve --model "$model" --port "$port" --threads 1 >/dev/null 2>&1 & rpid=$!
    for _ in $(seq 300); do
      curl -sf "http://127.0.0.1:$port/v1/replica/tokenizer" -o "$out" && break
      sleep 0.2
    done
    kill "$rpid" 2>/dev/null || true
    wait "$rpid" 2>/dev/null || true
    [ -s "$out" ] || { echo "could not read the SmolLM2 tokenizer from replica serve" >&2; return 1; }
    TOKENIZER_NAME="SmolLM2-135M-Instruct"
  fi
}

#!/usr/bin/env bash
# Capture real llama-server answers as test fixtures: start the pinned llama-server
# (scripts/llama-server.sh) on the default model (scripts/fetch-model.sh) on loopback, send
# one non-streaming and one streaming chat completion with the same prompt (so the second one
# reuses the first one's KV cache), then save
#   gateway/tests/fixtures/engine_metrics/llamacpp.txt   GET /metrics, after the requests
#   gateway/tests/fixtures/llamacpp/health.json          GET /health
#   gateway/tests/fixtures/llamacpp/models.json          GET /v1/models
#   gateway/tests/fixtures/llamacpp/props.json           GET /props
#   gateway/tests/fixtures/llamacpp/chat.json            POST /v1/chat/completions
#   gateway/tests/fixtures/llamacpp/chat_stream.sse      the same, "stream": true with usage
# Bodies are saved as the server sent them (the metrics file gets one provenance comment line
# first). The server is stopped at the end.
#
#   scripts/capture-llamacpp-fixtures.sh [PORT]   # default: a free loopback port
set -euo pipefail
cd "$(dirname "$0")/.."
say() { printf 'capture-llamacpp-fixtures: %s\n' "$*" >&2; }
die() { say "$*"; exit 1; }
command -v curl >/dev/null || die "curl missing (apt-get install curl)"

BIN="$(scripts/llama-server.sh)"
MODEL="$(scripts/fetch-model.sh)"
PORT="${1:-$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')}"
URL="http://127.0.0.1:$PORT"
METRICS_OUT=gateway/tests/fixtures/engine_metrics/llamacpp.txt
OUT=gateway/tests/fixtures/llamacpp
mkdir -p "$OUT" "$(dirname "$METRICS_OUT")"

LOG="$(mktemp)"
ARGS=(-m "$MODEL" --host 127.0.0.1 --port "$PORT" --metrics -c 2048 -np 2)
say "starting: $BIN ${ARGS[*]}"
"$BIN" "${ARGS[@]}" >"$LOG" 2>&1 &
PID=$!
trap 'kill "$PID" 2>/dev/null || true; wait "$PID" 2>/dev/null || true; rm -f "$LOG"' EXIT

for _ in $(seq 1 120); do
  if curl -fsS "$URL/health" >/dev/null 2>&1; then break; fi
  kill -0 "$PID" 2>/dev/null || { tail -n 30 "$LOG" >&2; die "llama-server exited"; }
  sleep 0.5
done
curl -fsS "$URL/health" >/dev/null || { tail -n 30 "$LOG" >&2; die "llama-server not healthy after 60 s"; }

get() { curl -fsS "$URL$1"; }
PROMPT='{"role": "user", "content": "Name three colours of the rainbow."}'
get /health >"$OUT/health.json"
get /v1/models >"$OUT/models.json"
get /props >"$OUT/props.json"
curl -fsS "$URL/v1/chat/completions" -H 'Content-Type: application/json' \
  -d "{\"model\": \"smollm2\", \"messages\": [$PROMPT], \"max_tokens\": 16, \"temperature\": 0}" \
  >"$OUT/chat.json"
curl -fsSN "$URL/v1/chat/completions" -H 'Content-Type: application/json' \
  -d "{\"model\": \"smollm2\", \"messages\": [$PROMPT], \"max_tokens\": 16, \"temperature\": 0, \"stream\": true, \"stream_options\": {\"include_usage\": true}}" \
  >"$OUT/chat_stream.sse"
VERSION_LINE="$("$BIN" --version 2>&1 | grep -m1 '^version' || echo 'version unknown')"
{
  echo "# Captured by scripts/capture-llamacpp-fixtures.sh: GET /metrics of llama-server ($VERSION_LINE; llama.cpp vendored in llama-cpp-python 0.3.36) after one chat completion and one streamed chat completion; the lines below are as served."
  get /metrics
} >"$METRICS_OUT"
say "llama-server: $VERSION_LINE"
say "saved $METRICS_OUT and $OUT/{health,models,props,chat}.json, $OUT/chat_stream.sse"

#!/usr/bin/env bash
# A fleet on one machine: Redis, two CPU replicas of SmolLM2 and three gateways sharing
# tenant limits and keys through Redis.
#   scripts/fleet.sh [--gateways 3] [--replicas 2] [--port 8080] [--rpm 600]
# Gateway i listens on PORT+10*i (admin on the next port). Ctrl-C stops everything.
set -euo pipefail
cd "$(dirname "$0")/.."

say() { printf 'fleet.sh: %s\n' "$*" >&2; }
gateways=3 replicas=2 port=8080 rpm=600
while [ $# -gt 0 ]; do
  case "$1" in
    --gateways) gateways=$2; shift 2 ;;
    --replicas) replicas=$2; shift 2 ;;
    --port) port=$2; shift 2 ;;
    --rpm) rpm=$2; shift 2 ;;
    *) say "unknown flag $1 (flags: --gateways N --replicas N --port P --rpm N)"; exit 2 ;;
  esac
done

command -v cargo >/dev/null || { say "cargo not found: install the Rust toolchain first (https://rustup.rs)"; exit 1; }
if ! command -v redis-server >/dev/null || ! command -v cmake >/dev/null; then
  SUDO=""; [ "$(id -u)" != 0 ] && SUDO=sudo
  command -v apt-get >/dev/null || { say "install redis-server and cmake with your package manager, then rerun"; exit 1; }
  say "installing redis-server, redis-tools and cmake (apt-get)"
  $SUDO env DEBIAN_FRONTEND=noninteractive apt-get update -qq
  $SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq redis-server redis-tools cmake
fi
model=$(scripts/fetch-model.sh)
say "building replica and gateway (release)"
cargo build --release -q -p replica -p gateway
bin="${CARGO_TARGET_DIR:-target}/release"

run=$(mktemp -d /tmp/warmpath-fleet.XXXXXX)
pids=()
stop() {
  trap - EXIT INT TERM
  kill "${pids[@]}" 2>/dev/null || true
  wait 2>/dev/null || true
  say "stopped (logs in $run)"
  exit 0
}
trap stop EXIT INT TERM
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

redis_port=$(free_port)
redis-server --bind 127.0.0.1 --port "$redis_port" --save "" --appendonly yes --dir "$run" >"$run/redis.log" 2>&1 &
pids+=($!)

urls=()
for i in $(seq 1 "$replicas"); do
  p=$(free_port)
  "$bin/replica" serve --model "$model" --port "$p" >"$run/replica-$i.log" 2>&1 &
  pids+=($!)
  urls+=("http://127.0.0.1:$p")
done

key="sk-fleet-$(head -c 12 /dev/urandom | od -An -tx1 | tr -d ' \n')"
admin_key="wp-admin-$(head -c 12 /dev/urandom | od -An -tx1 | tr -d ' \n')"
sha() { printf '%s' "$1" | sha256sum | cut -d' ' -f1; }
cat >"$run/fleet.yaml" <<YAML
admin: {key_sha256: $(sha "$admin_key")}
auth: {enabled: true, salt_secret: "$(head -c 24 /dev/urandom | od -An -tx1 | tr -d ' \n')"}
tenants:
  - id: dev
    api_key_sha256: [$(sha "$key")]
    limits: {requests_per_minute: $rpm, request_burst: 20}
state: {backend: redis, url: "redis://127.0.0.1:$redis_port", gateway_count: $gateways}
replicas: [$(IFS=,; echo "${urls[*]}")]
YAML

for i in $(seq 0 $((gateways - 1))); do
  p=$((port + 10 * i))
  "$bin/gateway" --config "$run/fleet.yaml" --listen "127.0.0.1:$p" --admin-listen "127.0.0.1:$((p + 1))" \
    >"$run/gateway-$i.log" 2>&1 &
  pids+=($!)
done

for i in $(seq 0 $((gateways - 1))); do
  p=$((port + 10 * i))
  for _ in $(seq 1 600); do
    curl -sf "http://127.0.0.1:$p/ready" >/dev/null 2>&1 && break
    sleep 0.2
  done
done

cat <<MSG

Warmpath fleet is up: $gateways gateways sharing limits and keys through Redis 127.0.0.1:$redis_port,
$replicas replicas of SmolLM2-135M-Instruct. Tenant "dev" has $rpm requests/minute across the fleet.

MSG
for i in $(seq 0 $((gateways - 1))); do
  p=$((port + 10 * i))
  echo "  gateway $i   http://127.0.0.1:$p/v1   admin http://127.0.0.1:$((p + 1))"
done
cat <<MSG

  API key    $key
  admin key  $admin_key

  curl http://127.0.0.1:$port/v1/chat/completions -H "Authorization: Bearer $key" \\
    -H 'Content-Type: application/json' \\
    -d '{"model":"SmolLM2-135M-Instruct","messages":[{"role":"user","content":"Hi"}],"max_tokens":16}'
  curl -X POST http://127.0.0.1:$((port + 1))/admin/tenants/dev/keys -H "Authorization: Bearer $admin_key"

Logs and config in $run. Ctrl-C stops everything.
MSG
wait

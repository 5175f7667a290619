# Shared by scripts/fairness-bench.sh and scripts/deadline-bench.sh (source it after setting
# REPLICA, MODEL_PATH, work and the pids array): free loopback ports and two one-thread CPU
# replicas of the model, started and waited for.
# shellcheck shell=bash

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

# start_cpu_replicas: starts two `replica serve --threads 1` on free ports (killed with the
# caller's pids), waits until each answers; sets `replicas` (their URLs) and `model`.
start_cpu_replicas() {
  local i port r
  replicas=()
  for i in 0 1; do
    port=$(free_port)
    "$REPLICA" serve --model "$MODEL_PATH" --port "$port" --threads 1 >"$work/replica$i.log" 2>&1 &
    pids+=($!)
    replicas+=("http://127.0.0.1:$port")
  done
  for r in "${replicas[@]}"; do
    for _ in $(seq 1 600); do
      curl -sf "$r/v1/replica/info" >/dev/null && break
      sleep 0.2
    done
  done
  model=$(curl -sf "${replicas[0]}/v1/replica/info" | python3 -c 'import json,sys; print(json.load(sys.stdin)["model"])')
}

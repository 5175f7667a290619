#!/usr/bin/env bash
# Agent-loop benchmark (issue 40): `loadtest run --workload agent-loop` (one system prompt and
# tool list, then tool-call turns per conversation) through the gateway to mock vLLM servers
# (scripts/mock_vllm.py: vLLM's message preparation and transformers' apply_chat_template on
# Qwen 2.5's template and the Qwen 2 vocabulary, a prefix cache of 16-token blocks, vLLM's
# KV events over ZeroMQ for exactly the blocks it stores), once per policy with fresh
# servers. Prints, per policy, the share of requests whose x-warmpath-predicted-cached-tokens
# equals the mock's usage.prompt_tokens_details.cached_tokens, and the prefix hit rate
# (reported cached tokens / prompt tokens). The harness is the ignored test
# `bench_agent_loop` in tests/tests/agent_loop.rs.
#
#   scripts/bench-agent-loop.sh
#   RUNS=3 REPLICAS=4 USERS=32 ROUNDS=8 CONCURRENCY=8 scripts/bench-agent-loop.sh
#
# Knobs (environment): RUNS (1), REPLICAS (4), USERS (32 conversations), ROUNDS (8 requests
# per conversation), CONCURRENCY (8), POLICIES (warm,cache_aware,round_robin), SKIP_BUILD.
# Needs python3 with venv and network access on the first run (scripts/mock-vllm-venv.sh,
# scripts/render-reference.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_INCREMENTAL=${CARGO_INCREMENTAL:-0} CARGO_PROFILE_DEV_DEBUG=${CARGO_PROFILE_DEV_DEBUG:-false}
if [ "${SKIP_BUILD:-0}" != 1 ]; then
  cargo build -q -p gateway -p loadtest --bins
  cargo test -q -p warmpath-e2e --test agent_loop --no-run
fi
export AGENT_BENCH_REPLICAS=${REPLICAS:-4} AGENT_BENCH_USERS=${USERS:-32}
export AGENT_BENCH_ROUNDS=${ROUNDS:-8} AGENT_BENCH_CONCURRENCY=${CONCURRENCY:-8}
export AGENT_BENCH_POLICIES=${POLICIES:-warm,cache_aware,round_robin}
echo "# $(date -u +%F) $(nproc) cores, $(lscpu | sed -n 's/^Model name: *//p'); replicas $AGENT_BENCH_REPLICAS," \
  "users $AGENT_BENCH_USERS, rounds $AGENT_BENCH_ROUNDS, concurrency $AGENT_BENCH_CONCURRENCY"
for run in $(seq 1 "${RUNS:-1}"); do
  echo "## run $run"
  cargo test -q -p warmpath-e2e --test agent_loop -- --ignored --nocapture --test-threads 1 \
    bench_agent_loop 2>&1 | grep -E '^\||: #'
done

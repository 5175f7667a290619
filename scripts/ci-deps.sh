#!/usr/bin/env bash
# System packages the gateway and its tests need: cmake (Pingora's build), Redis and
# faketime (the fleet test), openssl (certificates of the Redis TLS test), python3 + the
# official OpenAI and Anthropic SDKs (the SDK e2e tests), python3-venv (scripts/k8s-check.sh), wrk and
# nginx (scripts/bench-gateway.sh only); and cargo-deny (the dependency checks in
# scripts/test.sh).
set -euo pipefail
export DEBIAN_FRONTEND=noninteractive
SUDO=""
if [ "$(id -u)" != 0 ] && command -v sudo >/dev/null; then SUDO=sudo; fi
need=()
command -v cmake >/dev/null || need+=(cmake)
command -v python3 >/dev/null || need+=(python3 python3-pip)
# A virtualenv for the Kubernetes manifest tools (scripts/k8s-check.sh).
python3 -c 'import ensurepip' 2>/dev/null || need+=(python3-venv)
# Redis (server and redis-cli, for a single server and a 3-master Cluster) and libfaketime:
# the gateway fleet test (tests/tests/fleet.rs).
command -v redis-server >/dev/null || need+=(redis-server)
command -v redis-cli >/dev/null || need+=(redis-tools)
# openssl (the CLI): the Redis TLS test makes its CA and certificates with it
# (tests/tests/redis_tls.rs); Debian's redis-server is built with TLS.
command -v openssl >/dev/null || need+=(openssl)
[ -e /usr/lib/x86_64-linux-gnu/faketime/libfaketimeMT.so.1 ] || command -v faketime >/dev/null || need+=(faketime)
# iproute2 (`ip netns`, veth): the fleet chaos test (tests/tests/fleet_chaos.rs) cuts one
# gateway off Redis in a network namespace (it needs root, as CI has).
command -v ip >/dev/null || need+=(iproute2)
# Debian Chromium + ChromeDriver: the dashboard browser test (tests/tests/dashboard.rs).
command -v chromium >/dev/null || need+=(chromium)
command -v chromedriver >/dev/null || need+=(chromium-driver)
if [ "${WARMPATH_BENCH_DEPS:-0}" = 1 ]; then
  command -v wrk >/dev/null || need+=(wrk)
  command -v nginx >/dev/null || need+=(nginx)
fi
if [ ${#need[@]} -gt 0 ]; then
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq "${need[@]}"
fi
if ! python3 -c 'import openai' 2>/dev/null; then
  python3 -m pip install -q openai 2>/dev/null || python3 -m pip install -q --break-system-packages openai
fi
# The official Anthropic SDK: the Messages API e2e test (tests/tests/anthropic_sdk.rs).
if ! python3 -c 'import anthropic' 2>/dev/null; then
  python3 -m pip install -q anthropic 2>/dev/null || python3 -m pip install -q --break-system-packages anthropic
fi
# msgspec, pyzmq and pydantic: the driver that runs vLLM's and SGLang's own KV event
# publishers (scripts/engine_kv_publisher.py, gateway/tests/kv_events_engines).
if ! python3 -c 'import msgspec, zmq, pydantic' 2>/dev/null; then
  python3 -m pip install -q msgspec pyzmq pydantic 2>/dev/null ||
    python3 -m pip install -q --break-system-packages msgspec pyzmq pydantic
fi

# cargo-deny, pinned: deny.toml's schema has changed between releases, so a new release
# must not change the suite unannounced (bump this and check deny.toml together). Built
# from crates.io with its own lockfile: about 4 CPU-minutes, 10 minutes of wall time on a
# busy 2-core VM; nothing once ~/.cargo/bin has this version.
CARGO_DENY_VERSION=0.20.2
if [ "$(cargo deny --version 2>/dev/null)" != "cargo-deny $CARGO_DENY_VERSION" ]; then
  cargo install --locked "cargo-deny@$CARGO_DENY_VERSION"
fi

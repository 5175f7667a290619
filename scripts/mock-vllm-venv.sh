#!/usr/bin/env bash
# The virtualenv scripts/mock_vllm.py runs in (the mock vLLM of tests/tests/agent_loop.rs and
# scripts/bench-agent-loop.sh), cached under ~/.cache/warmpath (WARMPATH_CACHE):
# transformers and jinja2 (the same pins as scripts/render-reference.sh, no torch), pyzmq
# (the KV event publisher's sockets) and msgspec (vLLM's msgpack encoder). Prints one line:
#   python=PATH   the venv's interpreter
# A second run prints the cached path at once. Needs python3 with venv and pip, and network
# access on the first run.
set -euo pipefail

TRANSFORMERS_VERSION=4.57.1
JINJA2_VERSION=3.1.6
PYZMQ_VERSION=26.2.0
MSGSPEC_VERSION=0.19.0
CACHE=${WARMPATH_CACHE:-$HOME/.cache/warmpath}
VENV=$CACHE/mock-vllm-venv-$TRANSFORMERS_VERSION-$PYZMQ_VERSION-$MSGSPEC_VERSION
PY=${PYTHON:-python3}

die() { echo "mock-vllm-venv: $*" >&2; exit 1; }
mkdir -p "$CACHE"

if ! [ -x "$VENV/bin/python" ]; then
  command -v "$PY" >/dev/null || die "no $PY: install python3 with the venv module (python3-venv)"
  rm -rf "$VENV.tmp"
  "$PY" -m venv "$VENV.tmp" 2>/dev/null ||
    die "cannot create a virtualenv with $PY: install python3-venv"
  "$VENV.tmp/bin/pip" install --quiet --disable-pip-version-check \
    "transformers==$TRANSFORMERS_VERSION" "jinja2==$JINJA2_VERSION" \
    "pyzmq==$PYZMQ_VERSION" "msgspec==$MSGSPEC_VERSION" >&2 ||
    die "pip could not install transformers, jinja2, pyzmq and msgspec (network?)"
  rm -rf "$VENV"
  mv "$VENV.tmp" "$VENV"
fi

echo "python=$VENV/bin/python"

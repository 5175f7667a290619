#!/usr/bin/env bash
# Sets up what text/tests/render_reference.rs compares against, cached under
# ~/.cache/warmpath (WARMPATH_CACHE): a virtualenv with transformers and jinja2 (no torch),
# and the vocab-only GGUF files of llama.cpp's tests (models/ggml-vocab-*.gguf, from the
# llama-cpp-python sdist that scripts/llama-server.sh pins). Prints two lines:
#   python=PATH   the venv's interpreter (runs scripts/render_reference.py)
#   vocab=DIR     the directory holding the GGUF vocab files
# A second run prints the cached paths at once. Needs python3 with venv and pip, and
# network access on the first run.
set -euo pipefail

TRANSFORMERS_VERSION=4.57.1
JINJA2_VERSION=3.1.6
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
CACHE=${WARMPATH_CACHE:-$HOME/.cache/warmpath}
VERSION=$(sed -n 's/^VERSION=//p' "$ROOT/scripts/llama-server.sh")
SDIST_SHA256=$(sed -n 's/^SDIST_SHA256=//p' "$ROOT/scripts/llama-server.sh")
VENV=$CACHE/render-ref-venv-$TRANSFORMERS_VERSION
VOCAB=$CACHE/render-ref-vocab-$VERSION
PY=${PYTHON:-python3}
VOCABS=(llama-bpe qwen2)

die() { echo "render-reference: $*" >&2; exit 1; }
mkdir -p "$CACHE"

if ! [ -x "$VENV/bin/python" ]; then
  command -v "$PY" >/dev/null || die "no $PY: install python3 with the venv module (python3-venv)"
  rm -rf "$VENV.tmp"
  "$PY" -m venv "$VENV.tmp" 2>/dev/null ||
    die "cannot create a virtualenv with $PY: install python3-venv"
  "$VENV.tmp/bin/pip" install --quiet --disable-pip-version-check \
    "transformers==$TRANSFORMERS_VERSION" "jinja2==$JINJA2_VERSION" >&2 ||
    die "pip could not install transformers==$TRANSFORMERS_VERSION jinja2==$JINJA2_VERSION (network?)"
  rm -rf "$VENV"
  mv "$VENV.tmp" "$VENV"
  # The venv's scripts name the interpreter by its old path; only bin/python is used.
fi

have_vocab() { for v in "${VOCABS[@]}"; do [ -f "$VOCAB/ggml-vocab-$v.gguf" ] || return 1; done; }
if ! have_vocab; then
  TMP=$(mktemp -d)
  trap 'rm -rf "$TMP"' EXIT
  echo "render-reference: downloading llama-cpp-python==$VERSION (sdist) for its vocab files" >&2
  "$PY" -m pip download --quiet --no-deps --no-binary :all: "llama-cpp-python==$VERSION" -d "$TMP" >&2 ||
    die "pip could not download llama-cpp-python==$VERSION (network?)"
  SDIST="$TMP/llama_cpp_python-$VERSION.tar.gz"
  echo "$SDIST_SHA256  $SDIST" | sha256sum -c --quiet - >&2 || die "SHA-256 of $SDIST does not match the pin"
  members=()
  for v in "${VOCABS[@]}"; do
    members+=("llama_cpp_python-$VERSION/vendor/llama.cpp/models/ggml-vocab-$v.gguf")
  done
  tar -xzf "$SDIST" -C "$TMP" "${members[@]}"
  mkdir -p "$VOCAB.tmp"
  cp "$TMP/llama_cpp_python-$VERSION/vendor/llama.cpp/models/"ggml-vocab-*.gguf "$VOCAB.tmp/"
  rm -rf "$VOCAB"
  mv "$VOCAB.tmp" "$VOCAB"
fi

echo "python=$VENV/bin/python"
echo "vocab=$VOCAB"

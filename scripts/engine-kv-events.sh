#!/usr/bin/env bash
# The KV event publishers of vLLM and SGLang, from their published packages, for
# gateway/tests/kv_events_engines (scripts/engine_kv_publisher.py runs them). For each pinned
# version: `pip download --no-deps` of the wheel (vLLM's are 240-440 MB; a wheel is one file
# for every Python version), the one module extracted, its SHA-256 checked against the pin,
# the wheel deleted. Only the extracted files stay, under ~/.cache/warmpath
# (WARMPATH_CACHE)/engine-kv-events/<engine>-<version>/. A second run downloads nothing.
# Checks that python3 has what the driver imports (msgspec, pyzmq, pydantic: scripts/ci-deps.sh
# installs them). Prints one line: dir=PATH (the folder holding <engine>-<version>/).
set -euo pipefail

CACHE=${WARMPATH_CACHE:-$HOME/.cache/warmpath}/engine-kv-events
PY=${PYTHON:-python3}
# engine version wheel-platform module-path sha256-of-the-module
PINS=(
  "vllm 0.9.2 manylinux1_x86_64 vllm/distributed/kv_events.py dc0f92c472ded436abd883074ed4e55475134638355524ef05427330c2e6675f"
  "vllm 0.11.0 manylinux1_x86_64 vllm/distributed/kv_events.py 232ccb502d7c8ed3b6e55b7dc0dd6d82b4c6baa8637e10862b71d260dc8f04f2"
  "vllm 0.34.0 manylinux_2_28_x86_64 vllm/distributed/kv_events.py 82b362a0a7f89318d9127addfce254d537f5078a31aa87beb08493b0953895ee"
  "sglang 0.4.9 any sglang/srt/disaggregation/kv_events.py c856edc0e79b95c0a63974e3834d13a29c67ca3926081408573e3a281f237ad6"
  "sglang 0.5.9 any sglang/srt/disaggregation/kv_events.py 44b3f65e5674cd24dbfe732ca2c973bebb0fa27c76c9d840b38be58b9004b6ca"
  "sglang 0.5.23 manylinux_2_34_x86_64 sglang/srt/disaggregation/kv_events.py ef80e7165b11280d30bc07a9e3c04de5057ee45e9c94503a3ac432b009a0e421"
)

die() { echo "engine-kv-events: $*" >&2; exit 1; }
command -v "$PY" >/dev/null || die "no $PY: install python3 (scripts/ci-deps.sh)"
"$PY" -c 'import msgspec, zmq, pydantic' 2>/dev/null ||
  die "$PY lacks msgspec, pyzmq or pydantic: run scripts/ci-deps.sh (or pip install msgspec pyzmq pydantic)"
mkdir -p "$CACHE"

for pin in "${PINS[@]}"; do
  read -r engine version platform module sha <<<"$pin"
  dest="$CACHE/$engine-$version"
  if [ -f "$dest/$module" ] && echo "$sha  $dest/$module" | sha256sum -c --quiet - 2>/dev/null; then
    continue
  fi
  tmp=$(mktemp -d "$CACHE/.dl.XXXXXX")
  echo "engine-kv-events: downloading $engine==$version (wheel) for $module" >&2
  args=(download --quiet --no-deps --only-binary :all: -d "$tmp/whl")
  if [ "$platform" != any ]; then
    args+=(--platform "$platform" --python-version 3.11 --implementation cp)
  fi
  "$PY" -m pip "${args[@]}" "$engine==$version" >&2 ||
    { rm -rf "$tmp"; die "pip could not download $engine==$version (network?)"; }
  # Only the one member: a vLLM wheel unpacks to more than a gigabyte.
  "$PY" - "$tmp" "$module" <<'EOF' || { rm -rf "$tmp"; die "cannot extract $module"; }
import glob, sys, zipfile
tmp, module = sys.argv[1], sys.argv[2]
zipfile.ZipFile(glob.glob(tmp + "/whl/*.whl")[0]).extract(module, tmp + "/x")
EOF
  echo "$sha  $tmp/x/$module" | sha256sum -c --quiet - >&2 ||
    { rm -rf "$tmp"; die "SHA-256 of $module in $engine==$version does not match the pin"; }
  rm -rf "$dest"
  mkdir -p "$dest/$(dirname "$module")"
  cp "$tmp/x/$module" "$dest/$module"
  rm -rf "$tmp"
done

echo "dir=$CACHE"

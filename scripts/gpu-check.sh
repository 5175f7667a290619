#!/usr/bin/env bash
# CUDA backend check for a machine with one NVIDIA GPU and no network. (owner: cuda)
#
#   scripts/gpu-check.sh [REPLICA_BINARY] [extra `replica gpu-check` flags...]
#
# REPLICA_BINARY (default ./replica) is an x86-64 replica built elsewhere with
#   cargo build --release -p replica --features cuda
# Within 8 minutes it runs `replica gpu-check`: (1) CPU vs CUDA logits on
# dummy:smollm2-135m and dummy:llama-1b (~1.2B parameters) for prefill and decode,
# relative error <= 1e-2; (2) prefill tokens/s and decode tokens/s at batch 1, 16, 64;
# (3) decode against the memory-bandwidth floor. The table is printed last.
# Without a GPU (or without the CUDA libraries) it fails at once, saying what is missing.
set -euo pipefail

die() {
    echo "gpu-check: FAILED: $*" >&2
    exit 1
}

BIN="${1:-./replica}"
[ $# -gt 0 ] && shift
LIMIT_S="${GPU_CHECK_TIMEOUT_S:-470}"

[ -f "$BIN" ] || die "no replica binary at '$BIN' (pass its path as the first argument)"
[ -x "$BIN" ] || chmod +x "$BIN" 2>/dev/null || die "'$BIN' is not executable"
[ "$(uname -m)" = x86_64 ] || die "the replica binary is x86-64; this machine is $(uname -m)"

# A GPU first: the device node or a working nvidia-smi.
if command -v nvidia-smi >/dev/null 2>&1; then
    nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader \
        || die "nvidia-smi finds no usable NVIDIA GPU"
elif [ ! -e /dev/nvidia0 ]; then
    die "no NVIDIA GPU on this machine (no /dev/nvidia0, no nvidia-smi)"
fi

# NVRTC and cuBLAS are opened at run time: add the usual install places to the search
# path (CUDA toolkit, distribution packages, pip wheels nvidia-*-cu12).
extra=""
for d in /usr/local/cuda/lib64 /usr/local/cuda/targets/x86_64-linux/lib /usr/local/cuda-*/lib64 \
    /usr/lib/x86_64-linux-gnu /usr/local/lib/python3*/dist-packages/nvidia/*/lib \
    /usr/local/lib/python3*/site-packages/nvidia/*/lib /usr/lib/python3/dist-packages/nvidia/*/lib \
    "$HOME"/.local/lib/python3*/site-packages/nvidia/*/lib; do
    [ -d "$d" ] && extra="$extra:$d"
done
export LD_LIBRARY_PATH="${extra#:}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"

"$BIN" gpu-check --help >/dev/null 2>&1 \
    || die "'$BIN' has no gpu-check subcommand (an older replica?)"

echo "gpu-check: $BIN, limit ${LIMIT_S}s, $(date -u +%Y-%m-%dT%H:%M:%SZ)" >&2
set +e
timeout --kill-after=10 "$LIMIT_S" "$BIN" gpu-check "$@"
rc=$?
set -e
case $rc in
    0) echo "gpu-check: passed" >&2 ;;
    124 | 137) die "did not finish within ${LIMIT_S}s" ;;
    *) die "replica gpu-check exited with status $rc (see the message above)" ;;
esac

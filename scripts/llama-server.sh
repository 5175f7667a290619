#!/usr/bin/env bash
# Build llama.cpp's `llama-server` from source at a pinned version, once, and print its path
# (only the path on stdout; progress on stderr). A second run prints the cached path at once.
#
# Source: the llama-cpp-python sdist from PyPI (version and SHA-256 pinned below), which
# vendors llama.cpp under vendor/llama.cpp. Built with cmake and a C++ compiler only:
#   - CPU backend only, Release, only the `llama-server` target;
#   - static libraries (BUILD_SHARED_LIBS=OFF) and no OpenMP, so the cached binary needs no
#     libllama/libggml/libgomp beside it (it links only the C/C++ runtime);
#   - no network in the build or the binary: no HTTPS client (LLAMA_OPENSSL=OFF; this llama.cpp
#     has no CURL option any more, LLAMA_CURL=OFF is passed for older trees and ignored), no web
#     UI download or npm build (the server answers without its web page);
#   - no tests, examples or the unified app.
# GGML_NATIVE=ON by default (tuned to this CPU): the cache key beside the binary holds the
# version, architecture, CPU model and flags, compiler and cmake options, and a different key
# rebuilds in place. WARMPATH_LLAMA_NATIVE=0 builds ggml's portable set instead (x86-64: SSE4.2,
# AVX, AVX2, BMI2, FMA, F16C), for a cache shared between machines.
#
#   scripts/llama-server.sh                   # ~/.cache/warmpath/llama-server-0.3.36/bin/llama-server
#   WARMPATH_LLAMA_DIR=DIR scripts/llama-server.sh   # cache in DIR/bin/llama-server instead
#   JOBS=2 scripts/llama-server.sh            # parallel compile jobs (default: nproc)
#
# Needs python3 with pip (the download), cmake >= 3.14, a C++17 compiler and make or ninja;
# missing cmake, g++ or make are installed with apt-get, as scripts/ci-deps.sh does.
set -euo pipefail

VERSION=0.3.36
SDIST_SHA256=832db0699007f1be95a7e41ef12e88926b02ba836461e36a36372db2760c1a2e
DIR="${WARMPATH_LLAMA_DIR:-$HOME/.cache/warmpath/llama-server-$VERSION}"
BIN="$DIR/bin/llama-server"
NATIVE="${WARMPATH_LLAMA_NATIVE:-1}"
JOBS="${JOBS:-$(nproc 2>/dev/null || echo 2)}"
PY="${PYTHON:-python3}"

say() { printf 'llama-server.sh: %s\n' "$*" >&2; }
die() { say "$*"; exit 1; }

case "$NATIVE" in
  0) native_flag=OFF ;;
  1) native_flag=ON ;;
  *) die "WARMPATH_LLAMA_NATIVE must be 0 or 1, not '$NATIVE'" ;;
esac

CMAKE_OPTS=(
  -DCMAKE_BUILD_TYPE=Release
  -DBUILD_SHARED_LIBS=OFF
  -DGGML_NATIVE="$native_flag"
  -DGGML_OPENMP=OFF
  -DGGML_BACKEND_DL=OFF
  -DLLAMA_CURL=OFF
  -DLLAMA_OPENSSL=OFF
  -DLLAMA_BUILD_TESTS=OFF
  -DLLAMA_BUILD_EXAMPLES=OFF
  -DLLAMA_BUILD_APP=OFF
  -DLLAMA_BUILD_TOOLS=ON
  -DLLAMA_BUILD_SERVER=ON
  -DLLAMA_BUILD_UI=OFF
  -DLLAMA_USE_PREBUILT_UI=OFF
)
# Intel AMX: this ggml's AMX matrix kernels crash (SIGSEGV in ggml_backend_amx_mul_mat at the
# first warm-up decode) on the AMX-capable Xeon VMs these scripts run on. -march=native would
# compile them in, so on a CPU with AMX the native build is spelled out instead: everything
# the CPU has up to AVX-512 (VNNI, BF16), AMX off.
if [ "$NATIVE" = 1 ] && grep -q -m1 -w amx_tile /proc/cpuinfo 2>/dev/null; then
  flags="$(grep -m1 '^flags' /proc/cpuinfo)"
  has() { [[ " $flags " == *" $1 "* ]] && echo ON || echo OFF; }
  CMAKE_OPTS=("${CMAKE_OPTS[@]/-DGGML_NATIVE=ON/-DGGML_NATIVE=OFF}")
  CMAKE_OPTS+=(
    -DGGML_SSE42=ON -DGGML_AVX="$(has avx)" -DGGML_AVX2="$(has avx2)" -DGGML_FMA="$(has fma)"
    -DGGML_F16C="$(has f16c)" -DGGML_BMI2="$(has bmi2)" -DGGML_AVX_VNNI="$(has avx_vnni)"
    -DGGML_AVX512="$(has avx512f)" -DGGML_AVX512_VBMI="$(has avx512_vbmi)"
    -DGGML_AVX512_VNNI="$(has avx512_vnni)" -DGGML_AVX512_BF16="$(has avx512_bf16)"
    -DGGML_AMX_TILE=OFF -DGGML_AMX_INT8=OFF -DGGML_AMX_BF16=OFF
  )
fi

# What the binary was built for: a cached binary with another key is rebuilt.
cpu_signature() {
  if [ "$NATIVE" = 0 ]; then
    echo portable
  elif [ -r /proc/cpuinfo ]; then
    {
      grep -m1 -E '^(model name|CPU part)' /proc/cpuinfo || true
      grep -m1 -E '^(flags|Features)' /proc/cpuinfo || true
    } | sha256sum | cut -c1-16
  else
    echo unknown
  fi
}
build_key() {
  local cxx
  cxx="$("${CXX:-c++}" --version 2>/dev/null | head -n1 || echo none)"
  printf 'llama-cpp-python=%s sdist=%s arch=%s cpu=%s cxx=%s opts=%s\n' \
    "$VERSION" "$SDIST_SHA256" "$(uname -m)" "$(cpu_signature)" "$cxx" "${CMAKE_OPTS[*]}"
}

cached() { [ -x "$BIN" ] && [ -f "$DIR/build.key" ] && [ "$(cat "$DIR/build.key")" = "$(build_key)" ]; }

if cached; then
  echo "$BIN"
  exit 0
fi

mkdir -p "$DIR"
# One build at a time per cache directory; a run that waited finds the binary cached.
if command -v flock >/dev/null; then
  exec 9>"$DIR/.lock"
  flock 9
  if cached; then
    echo "$BIN"
    exit 0
  fi
fi

# Tools: cmake, a C++ compiler and make are installed with apt-get when missing.
need=()
command -v cmake >/dev/null || need+=(cmake)
command -v "${CXX:-c++}" >/dev/null || need+=(g++)
command -v make >/dev/null || command -v ninja >/dev/null || need+=(make)
if [ ${#need[@]} -gt 0 ]; then
  command -v apt-get >/dev/null || die "missing ${need[*]} and no apt-get to install them: install ${need[*]} (cmake >= 3.14, a C++17 compiler)"
  SUDO=""
  if [ "$(id -u)" != 0 ]; then
    command -v sudo >/dev/null || die "missing ${need[*]}: run as root or install them (apt-get install ${need[*]})"
    SUDO=sudo
  fi
  say "installing ${need[*]} (apt-get)"
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -qq >&2
  $SUDO apt-get install -y -qq "${need[@]}" >&2
fi
"$PY" -m pip --version >/dev/null 2>&1 || die "'$PY -m pip' missing: install python3-pip (the sdist comes from PyPI)"
cmake_version="$(cmake --version | head -n1 | awk '{print $3}')"
if [ "$(printf '%s\n3.14\n' "$cmake_version" | sort -V | head -n1)" != 3.14 ]; then
  die "cmake $cmake_version is too old: llama.cpp needs cmake >= 3.14"
fi
generator=()
if command -v ninja >/dev/null; then generator=(-G Ninja); fi

start=$(date +%s)
TMP="$(mktemp -d)"
trap 'rm -rf "$TMP"' EXIT

say "downloading llama-cpp-python==$VERSION (sdist) from PyPI"
"$PY" -m pip download --quiet --no-deps --no-binary :all: "llama-cpp-python==$VERSION" -d "$TMP" >&2 \
  || die "pip could not download llama-cpp-python==$VERSION"
SDIST="$TMP/llama_cpp_python-$VERSION.tar.gz"
[ -f "$SDIST" ] || die "pip left no $SDIST"
echo "$SDIST_SHA256  $SDIST" | sha256sum -c --quiet - >&2 || die "SHA-256 of $SDIST does not match the pin"
tar -xzf "$SDIST" -C "$TMP"
SRC="$TMP/llama_cpp_python-$VERSION/vendor/llama.cpp"
[ -f "$SRC/tools/server/CMakeLists.txt" ] || die "the sdist has no vendor/llama.cpp/tools/server"

say "configuring (GGML_NATIVE=$native_flag, static, CPU only)"
cmake -S "$SRC" -B "$TMP/build" "${generator[@]}" "${CMAKE_OPTS[@]}" >"$TMP/configure.log" 2>&1 || {
  tail -n 40 "$TMP/configure.log" >&2
  die "cmake configure failed (log above)"
}
say "building llama-server with $JOBS jobs (several minutes on 2 cores)"
cmake --build "$TMP/build" --target llama-server -j "$JOBS" >"$TMP/build.log" 2>&1 || {
  tail -n 40 "$TMP/build.log" >&2
  die "build failed (log above)"
}
built="$TMP/build/bin/llama-server"
[ -x "$built" ] || die "the build left no $built"
"$built" --version >/dev/null 2>&1 || die "$built does not run"

mkdir -p "$DIR/bin"
cp "$built" "$BIN.tmp"
mv -f "$BIN.tmp" "$BIN"
build_key >"$DIR/build.key"
say "built $BIN in $(($(date +%s) - start)) s"
echo "$BIN"

#!/usr/bin/env bash
# The workspace's crate layering, read from `cargo tree` (what each crate pulls in when it is
# built alone, transitively). Prints every rule it checks and fails naming the offending
# dependency and the path through which it comes in.
#
#   warmpath-core     depends on no workspace crate
#   router-policy     depends on no workspace crate but warmpath-core, and on no async
#                     runtime or HTTP crate (a pure library: no runtime, no I/O)
#   warmpath-kv-cache depends on no workspace crate but warmpath-core, and on no async
#                     runtime or HTTP crate (the replica and the simulator share it)
#   warmpath-protocol, warmpath-text
#                     do not depend on router-policy
#   warmpath-engine   depends on no workspace crate but warmpath-core, -protocol and -text,
#                     and its normal dependency tree has no tokio, axum, hyper, reqwest,
#                     redis or pingora (compute only: serving is the replica's)
#   gateway, replica  never depend on each other (not even as a dev-dependency)
#   warmpath-http     depends on no workspace crate, and on no reqwest, axum or pingora
#                     (the one outbound HTTP client: hyper's, on tokio)
#   every member      has no reqwest anywhere in its tree (warmpath-http is the client)
set -euo pipefail
cd "$(dirname "$0")/.."

fail=0
trees=$(mktemp -d)
trap 'rm -rf "$trees"' EXIT

# Reads `pkg`'s dependency graph (edge kinds `kinds`) once; a package cargo does not know
# stops the check (a rule that reads nothing would pass silently).
load() {
  local pkg=$1 kinds=$2
  [ -f "$trees/$pkg.$kinds" ] && return 0
  if ! cargo tree -q -p "$pkg" -e "$kinds" --prefix none --format '{p}' >"$trees/$pkg.$kinds"; then
    echo "check-layers: cargo tree -p $pkg -e $kinds failed" >&2
    exit 2
  fi
}

# Every package in `pkg`'s dependency graph (after `load`), one name a line, without `pkg`
# itself. `ws` keeps only workspace (path) crates.
deps() {
  local pkg=$1 kinds=$2 only=${3:-all}
  sed 's/ (\*)$//' "$trees/$pkg.$kinds" \
    | { if [ "$only" = ws ]; then grep ' (/' || true; else cat; fi; } \
    | awk '{print $1}' | sort -u | grep -vx -- "$pkg" || true
}

# How `dep` gets into `pkg`'s graph: the inverted tree from `dep` up to `pkg`.
how() {
  local pkg=$1 dep=$2 kinds=$3
  cargo tree -q -p "$pkg" -i "$dep" -e "$kinds" 2>/dev/null | head -n 20 | sed 's/^/      /'
}

broken() {
  local pkg=$1 dep=$2 kinds=$3 why=$4
  echo "  FAIL: $pkg -> $dep ($why); it comes in through:"
  how "$pkg" "$dep" "$kinds"
  fail=1
}

# rule_ws PKG KINDS "ALLOWED..." : PKG's workspace dependencies are among ALLOWED.
rule_ws() {
  local pkg=$1 kinds=$2 allowed=$3
  echo "check: $pkg depends on no workspace crate${allowed:+ but: $allowed} ($kinds)"
  load "$pkg" "$kinds"
  local d
  for d in $(deps "$pkg" "$kinds" ws); do
    case " $allowed " in
      *" $d "*) ;;
      *) broken "$pkg" "$d" "$kinds" "workspace crate not allowed below $pkg" ;;
    esac
  done
}

# rule_none PKG KINDS "REGEX" WHAT : no crate of PKG's graph matches REGEX.
rule_none() {
  local pkg=$1 kinds=$2 re=$3 what=$4
  echo "check: $pkg has no $what in its $kinds dependency tree"
  load "$pkg" "$kinds"
  local d
  for d in $(deps "$pkg" "$kinds" | grep -E -- "$re" || true); do
    broken "$pkg" "$d" "$kinds" "$what"
  done
}

# rule_not PKG KINDS DEP : DEP is not in PKG's graph.
rule_not() {
  local pkg=$1 kinds=$2 dep=$3
  echo "check: $pkg does not depend on $dep ($kinds)"
  load "$pkg" "$kinds"
  if deps "$pkg" "$kinds" ws | grep -qx -- "$dep"; then
    broken "$pkg" "$dep" "$kinds" "forbidden"
  fi
}

ASYNC_HTTP='^(tokio|tokio-.*|async-std|smol|futures|futures-.*|mio|axum|axum-.*|hyper|hyper-.*|http|http-body|http-body-util|reqwest|tower|tower-.*|actix-.*|pingora|pingora-.*|redis)$'
ENGINE_FORBIDDEN='^(tokio|axum|hyper|reqwest|redis|pingora|pingora-.*)$'

rule_ws warmpath-core normal,build ""
rule_ws router-policy normal,build "warmpath-core"
rule_none router-policy normal,build "$ASYNC_HTTP" "async runtime or HTTP crate"
rule_ws warmpath-kv-cache normal,build "warmpath-core"
rule_none warmpath-kv-cache normal,build "$ASYNC_HTTP" "async runtime or HTTP crate"
rule_not warmpath-protocol normal,build router-policy
rule_not warmpath-text normal,build router-policy
rule_ws warmpath-engine normal,build "warmpath-core warmpath-protocol warmpath-text"
rule_none warmpath-engine normal "$ENGINE_FORBIDDEN" "tokio/axum/hyper/reqwest/redis/pingora crate"
rule_not gateway normal,build,dev replica
rule_not replica normal,build,dev gateway
rule_ws warmpath-http normal,build ""
rule_none warmpath-http normal,build '^(reqwest|axum|axum-.*|pingora|pingora-.*)$' "reqwest/axum/pingora crate"
for member in $(cargo metadata -q --no-deps --format-version 1 --offline \
  | grep -o '"name":"[^"]*","version"' | sed 's/^"name":"//; s/","version"$//'); do
  rule_none "$member" normal,build,dev '^reqwest$' "reqwest (the workspace's client is warmpath-http)"
done

if [ "$fail" -ne 0 ]; then
  echo "check-layers: FAILED: a crate depends on one its layer forbids (see FAIL lines above)" >&2
  exit 1
fi
echo "check-layers: ok"

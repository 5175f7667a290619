#!/usr/bin/env bash
# tools/modcycles on every crate root of the workspace: each member's src/lib.rs and
# src/main.rs that exists (members read from `cargo metadata`, so a new crate is checked
# without editing this list). Fails on any module cycle, printing each cycle's edges with
# the file:line that makes them (#[cfg(test)] code left out).
#
# The gateway also keeps its layering rules: the control plane and the shared state never
# reach the data plane (proxy/), even through another module.
set -euo pipefail
cd "$(dirname "$0")/.."

cargo build -q -p modcycles
bin=target/debug/modcycles

gateway_rules=(
  --forbid control=proxy --forbid state=proxy --forbid replicas=proxy --forbid routing=proxy
  --forbid tenants=proxy --forbid fleet=proxy --forbid metrics=proxy --forbid outcome=proxy
  --forbid dashboard=proxy
  --forbid api=proxy
)

members=$(cargo metadata -q --no-deps --format-version 1 --offline \
  | grep -o '"manifest_path":"[^"]*"' | sed 's/^"manifest_path":"//; s/"$//')
[ -n "$members" ] || { echo "modcycles-all: cargo metadata listed no workspace members" >&2; exit 2; }

failed=()
checked=0
for manifest in $members; do
  dir=$(dirname "$manifest")
  rel=${dir#"$PWD"/}
  for root in "$rel/src/lib.rs" "$rel/src/main.rs"; do
    [ -f "$root" ] || continue
    checked=$((checked + 1))
    if [ "$rel" = gateway ] && [ "$root" = gateway/src/lib.rs ]; then
      rules=("${gateway_rules[@]}")
    else
      rules=()
    fi
    if ! "$bin" ${rules[@]+"${rules[@]}"} "$root"; then
      failed+=("$root")
    fi
  done
done

echo "modcycles-all: $checked crate roots checked"
if [ ${#failed[@]} -gt 0 ]; then
  echo "modcycles-all: FAILED: module cycles or broken layering rules in: ${failed[*]}" >&2
  exit 1
fi

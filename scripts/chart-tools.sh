#!/usr/bin/env bash
# Builds the pinned client tools the chart tests (tests/charts), scripts/release.sh and the demo use,
# from their Go modules with the machine's Go (as scripts/k8s-binaries.sh builds kubelet), into a
# cache directory keyed by version:
#   helm v3.19.0          helm.sh/helm/v3, built in the module's own directory (its go.mod, go.sum)
#   helmfile v0.167.1     github.com/helmfile/helmfile, likewise (0.166.0, the version used before,
#                         is not served by the module proxy; 0.167.1 is the next patch release of
#                         the v0 line and renders helmfile.yaml the same: tests/charts/tests/helmfile.rs)
#   kubectl v1.34.0       the main of k8s.io/kubernetes/cmd/kubectl over k8s.io/kubectl v0.34.0, the
#                         version helm v3.19.0 requires, in a module that starts from helm's go.mod
#                         and go.sum (so it reuses the packages compiled for helm: about a third
#                         of a build of its own)
#   kubernetes-validate 1.37.0 and its dependencies, from PyPI into a virtualenv, every file checked
#                         against the sha256 in REQUIREMENTS below (pip --require-hashes)
#
# Every Go module is verified: the module itself against the Go checksum database (GOSUMDB, never
# off; GONOSUMDB/GOPRIVATE/GOINSECURE must be unset) when it is downloaded, and its dependencies
# against the go.sum it ships (GOFLAGS=-mod=readonly: a build that needs a module go.sum does not
# list fails instead of resolving it). Builds use -trimpath and CGO_ENABLED=0.
#
#   scripts/chart-tools.sh           build if missing, print the bin directory on stdout
#   scripts/chart-tools.sh --print   print the bin directory without building (exit 1 if incomplete)
#
# Idempotent: when every tool exists it prints the directory and exits at once. A version change
# changes the directory name, so the tools are rebuilt. The chart tests find the tools through
# $PACTO_CHART_TOOLS (set it to the printed directory) or, when it is unset, the same default cache
# path this script uses (tests/charts/src/lib.rs, TOOLS_VERSION_KEY).
#
# Environment:
#   PACTO_CACHE   cache root (default: $HOME/.cache/pacto)
#   PYTHON        python interpreter for the kubernetes-validate virtualenv (default: python3)
set -euo pipefail

HELM_VERSION="v3.19.0"
# The commit of the v3.19.0 tag, as the released helm binary reports it (`helm version`).
HELM_COMMIT="3d8990f0836691f0229297773f3524598f46bda6"
HELMFILE_VERSION="v0.167.1"
KUBECTL_VERSION="v1.34.0"
KUBERNETES_VALIDATE_VERSION="1.37.0"
VERSION_KEY="helm-3.19.0-helmfile-0.167.1-kubectl-1.34.0-kv-1.37.0"

# kubernetes-validate and every package it pulls in, pinned with the sha256 of each accepted file
# (the wheels for CPython 3.11 and 3.12 on x86_64 Linux, where a package has binary wheels).
REQUIREMENTS="$(cat <<'EOF'
attrs==26.1.0 \
    --hash=sha256:c647aa4a12dfbad9333ca4e71fe62ddc36f4e63b2d260a37a8b83d2f043ac309
importlib-resources==7.1.0 \
    --hash=sha256:1bd7b48b4088eddb2cd16382150bb515af0bd2c70128194392725f82ad2c96a1
jsonschema==4.26.0 \
    --hash=sha256:d489f15263b8d200f8387e64b4c3a75f06629559fb73deb8fdfb525f2dab50ce
jsonschema-specifications==2025.9.1 \
    --hash=sha256:98802fee3a11ee76ecaca44429fda8a41bff98b00a0f2838151b113f210cc6fe
kubernetes-validate==1.37.0 \
    --hash=sha256:85136d018a27b50ec7fc049d902bfa5193f5976807e6c0f408e3ab6fe078cad9
packaging==26.4 \
    --hash=sha256:81383611a09c1bc0b08b76e0fd5829d7c6824c65b27a6aee339da133f4233ea2
pyyaml==6.0.4 \
    --hash=sha256:622aa875fa6533f25fedcffe23079357d65a690d462200afed5d8e9d0e01ebee \
    --hash=sha256:93bfb2459195406a518e2f487a9bbf01df240175f31e06f5a252ac6734c7bbf0
referencing==0.37.0 \
    --hash=sha256:381329a9f99628c9069361716891d34ad94af76e461dcb0335825aecc7692231
rpds-py==2026.9.1 \
    --hash=sha256:136a1c3fe4402b7008bc81cb62ee538481795b61a7e83df88dff3b3f02b726ff \
    --hash=sha256:addeda51556dac7c1a2f14cda62db8b621cd12afba3091d03a96c72932387eab
typing-extensions==4.16.0 \
    --hash=sha256:481caa481374e813c1b176ada14e97f1f67a4539ce9cfeb3f350d78d6370c2e8
EOF
)"

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

case "${1:-}" in
  --print) complete || die "tools missing in $BIN; run scripts/chart-tools.sh"; echo "$BIN"; exit 0 ;;
  "") ;;
  *) die "unknown argument '$1' (usage: scripts/chart-tools.sh [--print])" ;;
esac
if complete; then echo "$BIN"; exit 0; fi

if ! command -v go >/dev/null 2>&1 && [ -x /usr/local/go/bin/go ]; then export PATH="$PATH:/usr/local/go/bin"; fi
command -v go >/dev/null 2>&1 || die "the 'go' command is not on PATH; install Go (>= 1.26) to build helm, helmfile and kubectl"
command -v "$PYTHON" >/dev/null 2>&1 || die "$PYTHON is not on PATH (needed for kubernetes-validate)"

# Module verification stays on: no exemptions from the checksum database, no resolution beyond go.sum.
export GOFLAGS="-mod=readonly" GOWORK=off CGO_ENABLED=0
[ "$(go env GOSUMDB)" != off ] || die "GOSUMDB=off: the Go checksum database must verify the modules"
for v in GONOSUMDB GOPRIVATE GOINSECURE; do
  [ -z "$(go env "$v" 2>/dev/null)" ] || die "$v is set ($(go env "$v")): unset it, every module must be verified"
done

mkdir -p "$ROOT" "$BIN"
exec 9>"$ROOT/.lock"
flock 9
if complete; then echo "$BIN"; exit 0; fi
start=$SECONDS

# The directory of module $1 in the module cache, downloading (and verifying) it first.
module_dir() {
  local json dir
  json="$(go mod download -json "$1" 2>&1)" \
    || die "cannot download $1 (is the Go module proxy reachable? GOPROXY=$(go env GOPROXY)):\n$json"
  dir="$(printf '%s\n' "$json" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",\{0,1\}$/\1/p' | head -1)"
  [ -d "$dir" ] || die "no module directory for $1 in: $json"
  echo "$dir"
}

# Builds main package $3 of the module in directory $1 into $BIN/$2 (atomically), with ldflags $4.
gobuild() {
  local dir="$1" out="$BIN/$2" pkg="$3" ldflags="$4" t0=$SECONDS
  (cd "$dir" && go build -trimpath -ldflags="$ldflags" -o "$out.tmp" "$pkg") >&2 || die "go build of $2 failed"
  mv "$out.tmp" "$out"
  log "built $2 in $((SECONDS - t0)) s"
}

# ---------------------------------------------------------------- helm
if [ ! -x "$BIN/helm" ]; then
  log "building helm $HELM_VERSION (helm.sh/helm/v3)"
  dir="$(module_dir "helm.sh/helm/v3@$HELM_VERSION")"
  # The Kubernetes version helm assumes without a cluster (`.Capabilities.KubeVersion` in
  # `helm template`, lint): from its client-go, as helm's Makefile derives it (v0.34 -> 1.34).
  kminor="$(sed -n 's/^[[:space:]]*k8s\.io\/client-go v0\.\([0-9]*\)\..*$/\1/p' "$dir/go.mod" | head -1)"
  [ -n "$kminor" ] || die "no k8s.io/client-go requirement in $dir/go.mod"
  ldflags="-s -w -X helm.sh/helm/v3/internal/version.version=$HELM_VERSION"
  ldflags+=" -X helm.sh/helm/v3/internal/version.metadata= -X helm.sh/helm/v3/internal/version.gitCommit=$HELM_COMMIT"
  ldflags+=" -X helm.sh/helm/v3/internal/version.gitTreeState=clean"
  for pkg in helm.sh/helm/v3/pkg/lint/rules helm.sh/helm/v3/pkg/chartutil; do
    ldflags+=" -X $pkg.k8sVersionMajor=1 -X $pkg.k8sVersionMinor=$kminor"
  done
  gobuild "$dir" helm ./cmd/helm "$ldflags"
fi

# ---------------------------------------------------------------- helmfile
if [ ! -x "$BIN/helmfile" ]; then
  log "building helmfile $HELMFILE_VERSION (github.com/helmfile/helmfile)"
  dir="$(module_dir "github.com/helmfile/helmfile@$HELMFILE_VERSION")"
  gobuild "$dir" helmfile . \
    "-s -w -X go.szostok.io/version.version=${HELMFILE_VERSION#v} -X go.szostok.io/version.dirtyBuild=false"
fi

# ---------------------------------------------------------------- kubectl
if [ ! -x "$BIN/kubectl" ]; then
  log "building kubectl $KUBECTL_VERSION (k8s.io/kubectl, in helm $HELM_VERSION's module graph)"
  dir="$(module_dir "helm.sh/helm/v3@$HELM_VERSION")"
  KDIR="$ROOT/kubectl-module"
  rm -rf "$KDIR"
  mkdir -p "$KDIR"
  # helm's own go.mod and go.sum: the same versions of every shared module (so most packages come
  # from the build cache helm left), the same verified hashes.
  sed 's#^module .*#module pacto.local/kubectl#' "$dir/go.mod" >"$KDIR/go.mod"
  cp "$dir/go.sum" "$KDIR/go.sum"
  chmod u+w "$KDIR/go.mod" "$KDIR/go.sum"
  grep -q "^[[:space:]]*k8s.io/kubectl v0.${KUBECTL_VERSION#v1.}\$" "$KDIR/go.mod" \
    || die "helm $HELM_VERSION does not require k8s.io/kubectl v0.${KUBECTL_VERSION#v1.} (KUBECTL_VERSION)"
  # k8s.io/kubernetes/cmd/kubectl/kubectl.go of the same release.
  cat >"$KDIR/main.go" <<'EOF'
// Generated by scripts/chart-tools.sh: the main of k8s.io/kubernetes/cmd/kubectl.
package main

import (
	"os"

	_ "k8s.io/client-go/plugin/pkg/client/auth"
	"k8s.io/component-base/cli"
	"k8s.io/component-base/logs"
	"k8s.io/kubectl/pkg/cmd"
	"k8s.io/kubectl/pkg/cmd/util"
)

func main() {
	logs.GlogSetter(cmd.GetLogVerbosity(os.Args)) // nolint:errcheck
	command := cmd.NewDefaultKubectlCommand()
	if err := cli.RunNoErrOutput(command); err != nil {
		util.CheckErr(err)
	}
}
EOF
  # The few modules kubectl's commands import beyond helm's (k8s.io/metrics, ...) are added to
  # go.mod and go.sum, each checked against the checksum database; no version already there moves.
  (cd "$KDIR" && GOFLAGS=-mod=mod go list -deps . >"$ROOT/resolve-kubectl.log" 2>&1) \
    || die "resolving kubectl's modules failed, see $ROOT/resolve-kubectl.log"
  ldflags="-s -w"
  for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
    ldflags+=" -X $pkg.gitVersion=$KUBECTL_VERSION -X $pkg.gitMajor=1 -X $pkg.gitMinor=$(echo "$KUBECTL_VERSION" | cut -d. -f2)"
    ldflags+=" -X $pkg.gitTreeState=clean -X $pkg.buildDate=1970-01-01T00:00:00Z"
  done
  gobuild "$KDIR" kubectl . "$ldflags"
fi

# ---------------------------------------------------------------- kubernetes-validate
if [ ! -x "$BIN/kubernetes-validate" ]; then
  log "installing kubernetes-validate $KUBERNETES_VALIDATE_VERSION into $ROOT/venv (hash-checked)"
  rm -rf "$ROOT/venv"
  "$PYTHON" -m venv "$ROOT/venv"
  printf '%s\n' "$REQUIREMENTS" >"$ROOT/requirements.txt"
  "$ROOT/venv/bin/pip" install --quiet --disable-pip-version-check --no-deps --only-binary=:all: \
    --require-hashes -r "$ROOT/requirements.txt" >&2 \
    || die "pip install --require-hashes of kubernetes-validate failed (a file whose sha256 is not in REQUIREMENTS?)"
  ln -sf "$ROOT/venv/bin/kubernetes-validate" "$BIN/kubernetes-validate"
fi

complete || die "installation incomplete in $BIN"
log "ready in $((SECONDS - start)) s: $("$BIN/helm" version --short), $("$BIN/helmfile" --version), kubectl $KUBECTL_VERSION, kubernetes-validate $KUBERNETES_VALIDATE_VERSION"
echo "$BIN"

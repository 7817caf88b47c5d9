#!/usr/bin/env bash
# Builds the pinned Kubernetes control-plane binaries that the tests and the local demo use:
#   kube-apiserver, kube-controller-manager, kubectl (k8s.io/kubernetes) and etcd (go.etcd.io/etcd/server/v3)
# from Go modules, with the machine's Go, in throwaway modules under a cache directory keyed by version.
#
#   scripts/k8s-binaries.sh            build if missing, print the bin directory on stdout
#   scripts/k8s-binaries.sh --print    print the bin directory without building (exit 1 if incomplete)
#
# Idempotent: when all four binaries exist for the pinned versions, it prints the directory and exits
# at once. Tests find the binaries through $PACTO_K8S_BIN (set it to the printed directory) or, when it is
# unset, through the same default cache path this script uses.
#
# Environment:
#   PACTO_CACHE        cache root (default: $HOME/.cache/pacto)
#   PACTO_K8S_VERSION  k8s.io/kubernetes version (default below); staging modules get v0.<minor>.<patch>
#   PACTO_ETCD_VERSION go.etcd.io/etcd/server/v3 version (default below)
#   GOTOOLCHAIN        honoured; set by this script to $PACTO_GOTOOLCHAIN when that is set
set -euo pipefail

K8S_VERSION="${PACTO_K8S_VERSION:-v1.37.2}"
ETCD_VERSION="${PACTO_ETCD_VERSION:-v3.6.16}"
CACHE="${PACTO_CACHE:-${HOME:-/root}/.cache/pacto}"
ROOT="$CACHE/k8s/$K8S_VERSION-etcd-$ETCD_VERSION"
BIN="$ROOT/bin"
BINARIES=(kube-apiserver kube-controller-manager kubectl etcd)

log() { echo "k8s-binaries: $*" >&2; }
die() { printf "k8s-binaries: error: %b\n" "$*" >&2; exit 1; }

complete() {
  local b
  for b in "${BINARIES[@]}"; do [ -x "$BIN/$b" ] || return 1; done
}

if [ "${1:-}" = "--print" ]; then
  complete || die "binaries missing in $BIN; run scripts/k8s-binaries.sh"
  echo "$BIN"; exit 0
fi
if complete; then echo "$BIN"; exit 0; fi

if ! command -v go >/dev/null 2>&1 && [ -x /usr/local/go/bin/go ]; then export PATH="$PATH:/usr/local/go/bin"; fi
command -v go >/dev/null 2>&1 || die "the 'go' command is not on PATH; install Go (>= 1.26) to build the Kubernetes binaries"
if [ -n "${PACTO_GOTOOLCHAIN:-}" ]; then export GOTOOLCHAIN="$PACTO_GOTOOLCHAIN"; fi
export GOFLAGS="${GOFLAGS:-} -mod=mod"
export CGO_ENABLED=0
export GOWORK=off

# staging version: v1.37.2 -> v0.37.2
STAGING_VERSION="v0.${K8S_VERSION#v1.}"
mkdir -p "$ROOT" "$BIN"
LOCK="$ROOT/.lock"
exec 9>"$LOCK"
flock 9
if complete; then echo "$BIN"; exit 0; fi

start=$(date +%s)

# ---------------------------------------------------------------- kubernetes
KDIR="$ROOT/kubernetes-module"
mkdir -p "$KDIR"
if [ ! -x "$BIN/kube-apiserver" ] || [ ! -x "$BIN/kube-controller-manager" ] || [ ! -x "$BIN/kubectl" ]; then
  log "fetching k8s.io/kubernetes@$K8S_VERSION go.mod from the module proxy"
  modjson=$(cd "$KDIR" && go mod download -json "k8s.io/kubernetes@$K8S_VERSION" 2>&1) \
    || die "cannot download k8s.io/kubernetes@$K8S_VERSION (is the Go module proxy reachable? GOPROXY=$(go env GOPROXY)):\n$modjson"
  gomod=$(printf '%s' "$modjson" | sed -n 's/^[[:space:]]*"GoMod": "\(.*\)",\{0,1\}$/\1/p' | head -1)
  [ -f "$gomod" ] || die "no go.mod found for k8s.io/kubernetes@$K8S_VERSION in: $modjson"
  go_directive=$(sed -n 's/^go \([0-9.]*\)$/\1/p' "$gomod" | head -1)
  # every k8s.io module that k8s.io/kubernetes requires at v0.0.0 is a staging module
  mapfile -t staging < <(sed -n 's/^[[:space:]]*\(k8s\.io\/[A-Za-z0-9._/-]*\) v0\.0\.0$/\1/p' "$gomod" | sort -u)
  [ "${#staging[@]}" -gt 0 ] || die "found no staging modules in $gomod"
  {
    echo "module pacto.local/k8s-binaries"
    echo
    echo "go ${go_directive:-1.25.0}"
    echo
    echo "require k8s.io/kubernetes $K8S_VERSION"
    echo
    for m in "${staging[@]}"; do echo "replace $m => $m $STAGING_VERSION"; done
  } >"$KDIR/go.mod"
  cat >"$KDIR/tools.go" <<'EOF'
//go:build tools

package tools

import (
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kube-controller-manager"
	_ "k8s.io/kubernetes/cmd/kubectl"
)
EOF
  log "resolving ${#staging[@]} staging modules at $STAGING_VERSION (go directive ${go_directive:-?})"
  (cd "$KDIR" && go mod tidy -e >"$ROOT/tidy-kubernetes.log" 2>&1) || die "go mod tidy failed for kubernetes, see $ROOT/tidy-kubernetes.log"
  ldflags="-s -w"
  for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
    ldflags+=" -X $pkg.gitVersion=$K8S_VERSION -X $pkg.gitMajor=1 -X $pkg.gitMinor=$(echo "$K8S_VERSION" | cut -d. -f2)"
    ldflags+=" -X $pkg.gitTreeState=clean -X $pkg.buildDate=1970-01-01T00:00:00Z"
  done
  for b in kube-apiserver kube-controller-manager kubectl; do
    [ -x "$BIN/$b" ] && continue
    log "building $b $K8S_VERSION (several minutes on a cold cache)"
    (cd "$KDIR" && go build -trimpath -ldflags="$ldflags" -o "$BIN/$b.tmp" "k8s.io/kubernetes/cmd/$b") \
      || die "go build of k8s.io/kubernetes/cmd/$b failed"
    mv "$BIN/$b.tmp" "$BIN/$b"
  done
fi

# ---------------------------------------------------------------- etcd
EDIR="$ROOT/etcd-module"
mkdir -p "$EDIR"
if [ ! -x "$BIN/etcd" ]; then
  cat >"$EDIR/go.mod" <<EOF
module pacto.local/etcd-binary

go 1.24

require go.etcd.io/etcd/server/v3 $ETCD_VERSION
EOF
  cat >"$EDIR/tools.go" <<'EOF'
//go:build tools

package tools

import _ "go.etcd.io/etcd/server/v3"
EOF
  log "resolving go.etcd.io/etcd/server/v3@$ETCD_VERSION"
  (cd "$EDIR" && go mod tidy -e >"$ROOT/tidy-etcd.log" 2>&1) || die "go mod tidy failed for etcd, see $ROOT/tidy-etcd.log"
  log "building etcd $ETCD_VERSION"
  (cd "$EDIR" && go build -trimpath -ldflags="-s -w" -o "$BIN/etcd.tmp" go.etcd.io/etcd/server/v3) \
    || die "go build of go.etcd.io/etcd/server/v3 failed"
  mv "$BIN/etcd.tmp" "$BIN/etcd"
fi

complete || die "build finished but binaries are missing in $BIN"
log "built in $(( $(date +%s) - start )) s: $(du -sh "$BIN" | cut -f1) in $BIN"
echo "$BIN"

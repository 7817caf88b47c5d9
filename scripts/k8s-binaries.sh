#!/usr/bin/env bash
# Builds the pinned Kubernetes binaries that the tests and the local demo use, from Go modules, with the
# machine's Go, in throwaway modules under a cache directory keyed by version:
#   kube-apiserver, kube-controller-manager, kubectl (k8s.io/kubernetes) and etcd (go.etcd.io/etcd/server/v3);
#   with --node also the node side: kubelet, kube-proxy, kube-scheduler (the same k8s.io/kubernetes module),
#   crictl (sigs.k8s.io/cri-tools) and a minimal CoreDNS (only the plugins a cluster DNS needs).
#
#   scripts/k8s-binaries.sh                  build if missing, print the bin directory on stdout
#   scripts/k8s-binaries.sh --print          print the bin directory without building (exit 1 if incomplete)
#   scripts/k8s-binaries.sh --node           also build the node binaries (crictl and coredns are symlinks
#                                            in the bin directory to their own version-keyed cache dirs)
#   scripts/k8s-binaries.sh --print --node   print the bin directory if the node binaries are there too,
#                                            else fail naming the missing ones
#
# Idempotent: when all binaries exist for the pinned versions, it prints the directory and exits at once.
# A run without --node neither builds nor needs the node binaries. Tests find the binaries through
# $PACTO_K8S_BIN (set it to the printed directory) or, when it is unset, through the same default cache
# path this script uses.
#
# Environment:
#   PACTO_CACHE            cache root (default: $HOME/.cache/pacto)
#   PACTO_K8S_VERSION      k8s.io/kubernetes version (default below); staging modules get v0.<minor>.<patch>
#   PACTO_ETCD_VERSION     go.etcd.io/etcd/server/v3 version (default below)
#   PACTO_COREDNS_VERSION  github.com/coredns/coredns version for --node (default below)
#   PACTO_CRICTL_VERSION   sigs.k8s.io/cri-tools version for --node (default below)
#   GOTOOLCHAIN            honoured; set by this script to $PACTO_GOTOOLCHAIN when that is set
set -euo pipefail

K8S_VERSION="${PACTO_K8S_VERSION:-v1.37.2}"
ETCD_VERSION="${PACTO_ETCD_VERSION:-v3.6.16}"
COREDNS_VERSION="${PACTO_COREDNS_VERSION:-v1.14.3}"
CRICTL_VERSION="${PACTO_CRICTL_VERSION:-v1.37.0}"
CACHE="${PACTO_CACHE:-${HOME:-/root}/.cache/pacto}"
ROOT="$CACHE/k8s/$K8S_VERSION-etcd-$ETCD_VERSION"
BIN="$ROOT/bin"
COREDNS_DIR="$CACHE/coredns/$COREDNS_VERSION"
CRICTL_DIR="$CACHE/crictl/$CRICTL_VERSION"
BINARIES=(kube-apiserver kube-controller-manager kubectl etcd)
NODE_K8S_BINARIES=(kubelet kube-proxy kube-scheduler)
# CoreDNS plugins compiled in, in the order CoreDNS runs them (its plugin.cfg order); a Corefile may use
# only these directives.
COREDNS_PLUGINS=(reload ready health errors log loadbalance cache kubernetes loop forward)

log() { echo "k8s-binaries: $*" >&2; }
die() { printf "k8s-binaries: error: %b\n" "$*" >&2; exit 1; }

PRINT=0
NODE=0
for arg in "$@"; do
  case "$arg" in
    --print) PRINT=1 ;;
    --node) NODE=1 ;;
    *) die "unknown argument '$arg' (usage: scripts/k8s-binaries.sh [--print] [--node])" ;;
  esac
done

# Prints the names of the wanted binaries that are missing, one per line.
missing() {
  local b
  for b in "${BINARIES[@]}"; do [ -x "$BIN/$b" ] || echo "$b"; done
  [ "$NODE" = 1 ] || return 0
  for b in "${NODE_K8S_BINARIES[@]}"; do [ -x "$BIN/$b" ] || echo "$b"; done
  [ -x "$COREDNS_DIR/coredns" ] && [ "$(readlink "$BIN/coredns" 2>/dev/null)" = "$COREDNS_DIR/coredns" ] \
    || echo "coredns"
  [ -x "$CRICTL_DIR/crictl" ] && [ "$(readlink "$BIN/crictl" 2>/dev/null)" = "$CRICTL_DIR/crictl" ] \
    || echo "crictl"
}
complete() { [ -z "$(missing)" ]; }
flag_node() { [ "$NODE" = 1 ] && echo " --node"; true; }

if [ "$PRINT" = 1 ]; then
  complete || die "binaries missing in $BIN: $(missing | paste -sd' '); run scripts/k8s-binaries.sh$(flag_node)"
  echo "$BIN"; exit 0
fi
if complete; then echo "$BIN"; exit 0; fi

if ! command -v go >/dev/null 2>&1 && [ -x /usr/local/go/bin/go ]; then export PATH="$PATH:/usr/local/go/bin"; fi
command -v go >/dev/null 2>&1 || die "the 'go' command is not on PATH; install Go (>= 1.26) to build the Kubernetes binaries"
if [ -n "${PACTO_GOTOOLCHAIN:-}" ]; then export GOTOOLCHAIN="$PACTO_GOTOOLCHAIN"; fi
export GOFLAGS="${GOFLAGS:-} -mod=mod"
export CGO_ENABLED=0
export GOWORK=off

# Builds one Go main package into $2 (atomically: .tmp then mv) from module dir $1, logging the time.
# Usage: gobuild DIR OUT PKG LDFLAGS
gobuild() {
  local dir="$1" out="$2" pkg="$3" ldflags="$4" t0
  t0=$(date +%s)
  (cd "$dir" && go build -trimpath -ldflags="$ldflags" -o "$out.tmp" "$pkg") || die "go build of $pkg failed"
  mv "$out.tmp" "$out"
  log "built $(basename "$out") in $(( $(date +%s) - t0 )) s"
}

# staging version: v1.37.2 -> v0.37.2
STAGING_VERSION="v0.${K8S_VERSION#v1.}"
mkdir -p "$ROOT" "$BIN"
LOCK="$ROOT/.lock"
exec 9>"$LOCK"
flock 9
if complete; then echo "$BIN"; exit 0; fi

start=$(date +%s)

# ---------------------------------------------------------------- kubernetes
# One module and one tidy for every k8s.io/kubernetes command, control plane and node alike: tools.go
# always imports all six, so the node commands resolve against the same pinned release; which of them
# get built depends on --node.
KDIR="$ROOT/kubernetes-module"
mkdir -p "$KDIR"
k8s_wanted=(kube-apiserver kube-controller-manager kubectl)
[ "$NODE" = 1 ] && k8s_wanted+=("${NODE_K8S_BINARIES[@]}")
k8s_missing=()
for b in "${k8s_wanted[@]}"; do [ -x "$BIN/$b" ] || k8s_missing+=("$b"); done
if [ "${#k8s_missing[@]}" -gt 0 ]; then
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
	_ "k8s.io/kubernetes/cmd/kube-proxy"
	_ "k8s.io/kubernetes/cmd/kube-scheduler"
	_ "k8s.io/kubernetes/cmd/kubectl"
	_ "k8s.io/kubernetes/cmd/kubelet"
)
EOF
  log "resolving ${#staging[@]} staging modules at $STAGING_VERSION (go directive ${go_directive:-?})"
  (cd "$KDIR" && go mod tidy -e >"$ROOT/tidy-kubernetes.log" 2>&1) || die "go mod tidy failed for kubernetes, see $ROOT/tidy-kubernetes.log"
  ldflags="-s -w"
  for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
    ldflags+=" -X $pkg.gitVersion=$K8S_VERSION -X $pkg.gitMajor=1 -X $pkg.gitMinor=$(echo "$K8S_VERSION" | cut -d. -f2)"
    ldflags+=" -X $pkg.gitTreeState=clean -X $pkg.buildDate=1970-01-01T00:00:00Z"
  done
  for b in "${k8s_missing[@]}"; do
    log "building $b $K8S_VERSION (minutes on a cold cache)"
    gobuild "$KDIR" "$BIN/$b" "k8s.io/kubernetes/cmd/$b" "$ldflags"
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
  gobuild "$EDIR" "$BIN/etcd" go.etcd.io/etcd/server/v3 "-s -w"
fi

# ---------------------------------------------------------------- node: CoreDNS and crictl
if [ "$NODE" = 1 ]; then
  if [ ! -x "$COREDNS_DIR/coredns" ]; then
    # A minimal CoreDNS: coremain plus only the plugins in COREDNS_PLUGINS (the upstream main imports
    # every plugin, which pulls the cloud providers' SDKs). dnsserver.Directives lists the directives a
    # Corefile may use, in execution order: exactly these plugins (a few others get linked in as
    # dependencies of these, e.g. prometheus, but stay unusable).
    CDIR="$COREDNS_DIR/module"
    mkdir -p "$CDIR"
    printf 'module pacto.local/coredns-minimal\n\ngo 1.25.0\n\nrequire github.com/coredns/coredns %s\n' \
      "$COREDNS_VERSION" >"$CDIR/go.mod"
    {
      echo "// Generated by scripts/k8s-binaries.sh: CoreDNS with only the plugins a cluster DNS needs."
      echo "package main"
      echo
      echo "import ("
      echo "	\"github.com/coredns/coredns/core/dnsserver\""
      echo "	\"github.com/coredns/coredns/coremain\""
      for p in "${COREDNS_PLUGINS[@]}"; do echo "	_ \"github.com/coredns/coredns/plugin/$p\""; done
      echo ")"
      echo
      echo "func init() {"
      echo "	dnsserver.Directives = []string{"
      for p in "${COREDNS_PLUGINS[@]}"; do echo "		\"$p\","; done
      echo "	}"
      echo "}"
      echo
      echo "func main() { coremain.Run() }"
    } >"$CDIR/main.go"
    log "resolving github.com/coredns/coredns@$COREDNS_VERSION (plugins: ${COREDNS_PLUGINS[*]})"
    (cd "$CDIR" && go mod tidy >"$COREDNS_DIR/tidy.log" 2>&1) || die "go mod tidy failed for coredns, see $COREDNS_DIR/tidy.log"
    log "building coredns $COREDNS_VERSION"
    gobuild "$CDIR" "$COREDNS_DIR/coredns" . \
      "-s -w -X github.com/coredns/coredns/coremain.GitCommit=$COREDNS_VERSION-pacto-minimal"
  fi
  ln -sfn "$COREDNS_DIR/coredns" "$BIN/coredns"

  if [ ! -x "$CRICTL_DIR/crictl" ]; then
    mkdir -p "$CRICTL_DIR"
    log "building crictl $CRICTL_VERSION"
    t0=$(date +%s)
    # `go install pkg@version` builds in module-aware mode outside any module; -mod must not be set
    (cd "$CRICTL_DIR" && GOFLAGS="" GOBIN="$CRICTL_DIR/gobin" go install -trimpath \
      -ldflags="-s -w -X sigs.k8s.io/cri-tools/pkg/version.Version=$CRICTL_VERSION" \
      "sigs.k8s.io/cri-tools/cmd/crictl@$CRICTL_VERSION") || die "go install of crictl $CRICTL_VERSION failed"
    mv "$CRICTL_DIR/gobin/crictl" "$CRICTL_DIR/crictl" && rmdir "$CRICTL_DIR/gobin"
    log "built crictl in $(( $(date +%s) - t0 )) s"
  fi
  ln -sfn "$CRICTL_DIR/crictl" "$BIN/crictl"
fi

complete || die "build finished but binaries are missing in $BIN: $(missing | paste -sd' ')"
log "built in $(( $(date +%s) - start )) s: $(du -sh "$BIN" | cut -f1) in $BIN"
echo "$BIN"

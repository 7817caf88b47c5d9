#!/usr/bin/env bash
# A local Kubernetes control plane for humans: the same etcd + kube-apiserver + kube-controller-manager
# + workload simulator that the tests use (pacto-testenv), running in the background.
#
#   scripts/dev-cluster.sh up [CRD.yaml ...]   start (idempotent) and print the KUBECONFIG to use
#   scripts/dev-cluster.sh up --node [CRD...]  the same with a REAL node instead of the simulator
#                                              (root only): containerd, kubelet, kube-proxy, CoreDNS;
#                                              its API server's default Pod Security level is
#                                              restricted (docs/design/real-node.md#pod-security)
#   scripts/dev-cluster.sh env                 print `export KUBECONFIG=...` (eval "$(... env)")
#   scripts/dev-cluster.sh status              running or not, API server URL, log paths, node state
#   scripts/dev-cluster.sh down                stop everything (with --node: and restore the host)
#
# --node needs root, the Debian packages of `scripts/install-deps.sh --node`, the node binaries of
# `scripts/k8s-binaries.sh --node` (built here when missing) and the images of
# `scripts/node-images.sh` (built here). It changes global host state while it runs (iptables, the
# cni-pacto0 bridge, kubepods cgroups, sysctls, /var/lib/kubelet, /var/lib/cni, /var/log/pods,
# /run/containerd); `down` restores all of it, also after a crash of the cluster process. It refuses
# with one line where it cannot run (not root, a program missing, a port in use, another node).
#
# CRDs: the files given to `up`, else $PACTO_DEV_CRDS (space separated), else the generated CRDs in
# charts/pacto-crds/templates/*.yaml (and any charts/*/crds/*.yaml); with --node none by default
# (`helmfile -e local sync` installs them through the pacto-crds release).
# State lives in ${PACTO_DEV_DIR:-<repo>/.cache/dev-cluster}. Pods get Running/Ready through the
# simulator (no kubelet; annotate a pod template with testenv.pacto.trianalab.io/ready: "false" to
# simulate a failing readiness probe). See docs/testing.md.
set -euo pipefail

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
DIR="${PACTO_DEV_DIR:-$REPO/.cache/dev-cluster}"
PIDFILE="$DIR/dev-cluster.pid"
KUBECONFIG_PATH="$DIR/kubeconfig"
NODES="${PACTO_DEV_NODES:-2}"

die() { echo "dev-cluster: error: $*" >&2; exit 1; }

running() {
  [ -f "$PIDFILE" ] || return 1
  local pid; pid="$(cat "$PIDFILE")"
  [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null
}

print_env() {
  echo "export KUBECONFIG=$KUBECONFIG_PATH"
}

cmd_up() {
  local node=0
  if [ "${1:-}" = "--node" ]; then node=1; shift; fi
  if running && [ -f "$DIR/ready" ]; then
    echo "dev-cluster: already running ($(cat "$DIR/ready"))" >&2
    print_env; return 0
  fi
  if [ "$node" = 1 ] && [ "$(id -u)" != 0 ]; then
    die "--node needs root (a real node changes iptables, sysctls, cgroups and mounts)"
  fi
  local bindir
  if [ "$node" = 1 ]; then
    bindir="$("$REPO/scripts/k8s-binaries.sh" --node)" || die "building the Kubernetes node binaries failed"
  else
    bindir="$("$REPO/scripts/k8s-binaries.sh")" || die "building the Kubernetes binaries failed"
  fi
  export PACTO_K8S_BIN="$bindir"
  echo "dev-cluster: building pacto-dev-cluster" >&2
  (cd "$REPO" && cargo build -q -p pacto-testenv --bin pacto-dev-cluster) || die "cargo build failed"
  local target; target="$(cd "$REPO" && cargo metadata --format-version 1 --no-deps | sed -n 's/.*"target_directory":"\([^"]*\)".*/\1/p')"
  local bin="$target/debug/pacto-dev-cluster"
  [ -x "$bin" ] || die "$bin not found after the build"

  local crds=()
  if [ "$#" -gt 0 ]; then crds=("$@")
  elif [ -n "${PACTO_DEV_CRDS:-}" ]; then read -r -a crds <<<"$PACTO_DEV_CRDS"
  elif [ "$node" = 1 ]; then
    # On the real node the charts are installed with helmfile, whose pacto-crds release must own
    # the CRDs: installing them here would make its install fail on their ownership metadata.
    crds=()
  else
    shopt -s nullglob; crds=("$REPO"/charts/pacto-crds/templates/*.yaml "$REPO"/charts/*/crds/*.yaml); shopt -u nullglob
  fi
  local args=(--dir "$DIR" --nodes "$NODES")
  if [ "$node" = 1 ]; then
    args=(--dir "$DIR" --node)
    echo "dev-cluster: building the node images (scripts/node-images.sh)" >&2
    local images image
    images="$("$REPO/scripts/node-images.sh")" || die "building the node images failed"
    for image in $images; do args+=(--image "$image"); done
  fi
  local f
  for f in "${crds[@]}"; do
    [ -f "$f" ] || die "CRD file $f does not exist"
    args+=(--crd "$(cd "$(dirname "$f")" && pwd)/$(basename "$f")")
  done

  mkdir -p "$DIR"
  rm -f "$DIR/ready" "$DIR/mode"
  echo "$bin" >"$DIR/bin-path"
  if [ "$node" = 1 ]; then echo node >"$DIR/mode"; else echo simulator >"$DIR/mode"; fi
  setsid "$bin" "${args[@]}" >"$DIR/dev-cluster.log" 2>&1 </dev/null &
  echo $! >"$PIDFILE"
  local deadline=$((SECONDS + 180))
  until [ -f "$DIR/ready" ]; do
    if ! running; then
      if [ "$node" = 1 ] && grep -q 'Error: ' "$DIR/dev-cluster.log"; then
        # A refusal or a failed start: its one line (the node was torn down by the process).
        sed -n 's/^Error: /dev-cluster: error: /p' "$DIR/dev-cluster.log" | head -n 1 >&2
        exit 1
      fi
      tail -n 30 "$DIR/dev-cluster.log" >&2 || true
      die "the dev cluster exited during start-up (log: $DIR/dev-cluster.log)"
    fi
    [ "$SECONDS" -lt "$deadline" ] || { cmd_down; die "not ready within 180 s (log: $DIR/dev-cluster.log)"; }
    sleep 0.2
  done
  if [ "$node" = 1 ]; then
    echo "dev-cluster: ready at $(cat "$DIR/ready") with ${#crds[@]} CRD file(s) and the real node pacto-node" >&2
    grep -o 'control_plane_ms.*total_ms=[0-9]*' "$DIR/dev-cluster.log" | sed 's/^/dev-cluster: timings: /' >&2 || true
  else
    echo "dev-cluster: ready at $(cat "$DIR/ready") with ${#crds[@]} CRD file(s) and $NODES simulated node(s)" >&2
  fi
  echo "dev-cluster: kubectl is $bindir/kubectl; logs in $DIR" >&2
  print_env
}

# A node whose process died (or was killed) leaves host state behind: the cluster binary restores
# it from what the node recorded at its start (/run/pacto-node).
cleanup_node() {
  [ -e /run/pacto-node/lock ] || return 0
  local bin; bin="$(cat "$DIR/bin-path" 2>/dev/null || true)"
  [ -x "$bin" ] || die "a node left host state in /run/pacto-node but $DIR/bin-path names no pacto-dev-cluster binary; run: cargo run -p pacto-testenv --bin pacto-dev-cluster -- --dir $DIR --cleanup-node"
  echo "dev-cluster: restoring the host after a node that was not torn down" >&2
  "$bin" --dir "$DIR" --cleanup-node || die "the host is not fully restored (see above)"
}

cmd_down() {
  if ! running; then
    echo "dev-cluster: not running" >&2; rm -f "$PIDFILE"
    cleanup_node
    return 0
  fi
  local pid; pid="$(cat "$PIDFILE")"
  kill -TERM "$pid"
  local deadline=$((SECONDS + 60))
  while kill -0 "$pid" 2>/dev/null; do
    if [ "$SECONDS" -ge "$deadline" ]; then kill -KILL "$pid" 2>/dev/null || true; break; fi
    sleep 0.1
  done
  rm -f "$PIDFILE" "$DIR/ready"
  if [ "$(cat "$DIR/mode" 2>/dev/null)" = node ]; then
    grep -E 'teardown|node torn down' "$DIR/dev-cluster.log" | tail -n 5 >&2 || true
    cleanup_node
    echo "dev-cluster: stopped; host restored" >&2
  else
    echo "dev-cluster: stopped" >&2
  fi
}

cmd_status() {
  if running && [ -f "$DIR/ready" ]; then
    echo "running: $(cat "$DIR/ready") (pid $(cat "$PIDFILE")); kubeconfig $KUBECONFIG_PATH; logs $DIR/*.log"
    if [ "$(cat "$DIR/mode" 2>/dev/null)" = node ]; then
      local kubectl; kubectl="${PACTO_K8S_BIN:-$("$REPO/scripts/k8s-binaries.sh" --print 2>/dev/null || true)}/kubectl"
      echo "real node: run directory $DIR/node; logs $DIR/{containerd,kubelet,kube-proxy}.log"
      if [ -x "$kubectl" ]; then
        KUBECONFIG="$KUBECONFIG_PATH" "$kubectl" get nodes -o wide 2>&1 || true
        KUBECONFIG="$KUBECONFIG_PATH" "$kubectl" get pods -n kube-system 2>&1 || true
      fi
    fi
  elif running; then
    echo "starting (pid $(cat "$PIDFILE")); log $DIR/dev-cluster.log"
  else
    echo "not running"; return 1
  fi
}

case "${1:-}" in
  up) shift; cmd_up "$@" ;;
  down) cmd_down ;;
  env) running || die "not running; start it with: scripts/dev-cluster.sh up"; print_env ;;
  status) cmd_status ;;
  *) echo "usage: $0 up [--node] [CRD.yaml ...] | down | env | status" >&2; exit 2 ;;
esac

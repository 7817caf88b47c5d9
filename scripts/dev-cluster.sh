#!/usr/bin/env bash
# A local Kubernetes control plane for humans: the same etcd + kube-apiserver + kube-controller-manager
# + workload simulator that the tests use (pacto-testenv), running in the background.
#
#   scripts/dev-cluster.sh up [CRD.yaml ...]   start (idempotent) and print the KUBECONFIG to use
#   scripts/dev-cluster.sh env                 print `export KUBECONFIG=...` (eval "$(... env)")
#   scripts/dev-cluster.sh status              running or not, API server URL, log paths
#   scripts/dev-cluster.sh down                stop everything
#
# CRDs: the files given to `up`, else $PACTO_DEV_CRDS (space separated), else the generated CRDs in
# charts/pacto-crds/templates/*.yaml (and any charts/*/crds/*.yaml).
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
  if running && [ -f "$DIR/ready" ]; then
    echo "dev-cluster: already running ($(cat "$DIR/ready"))" >&2
    print_env; return 0
  fi
  local bindir
  bindir="$("$REPO/scripts/k8s-binaries.sh")" || die "building the Kubernetes binaries failed"
  export PACTO_K8S_BIN="$bindir"
  echo "dev-cluster: building pacto-dev-cluster" >&2
  (cd "$REPO" && cargo build -q -p pacto-testenv --bin pacto-dev-cluster) || die "cargo build failed"
  local target; target="$(cd "$REPO" && cargo metadata --format-version 1 --no-deps | sed -n 's/.*"target_directory":"\([^"]*\)".*/\1/p')"
  local bin="$target/debug/pacto-dev-cluster"
  [ -x "$bin" ] || die "$bin not found after the build"

  local crds=()
  if [ "$#" -gt 0 ]; then crds=("$@")
  elif [ -n "${PACTO_DEV_CRDS:-}" ]; then read -r -a crds <<<"$PACTO_DEV_CRDS"
  else
    shopt -s nullglob; crds=("$REPO"/charts/pacto-crds/templates/*.yaml "$REPO"/charts/*/crds/*.yaml); shopt -u nullglob
  fi
  local args=(--dir "$DIR" --nodes "$NODES")
  local f
  for f in "${crds[@]}"; do
    [ -f "$f" ] || die "CRD file $f does not exist"
    args+=(--crd "$(cd "$(dirname "$f")" && pwd)/$(basename "$f")")
  done

  mkdir -p "$DIR"
  rm -f "$DIR/ready"
  setsid "$bin" "${args[@]}" >"$DIR/dev-cluster.log" 2>&1 </dev/null &
  echo $! >"$PIDFILE"
  local deadline=$((SECONDS + 120))
  until [ -f "$DIR/ready" ]; do
    if ! running; then
      tail -n 30 "$DIR/dev-cluster.log" >&2 || true
      die "the dev cluster exited during start-up (log: $DIR/dev-cluster.log)"
    fi
    [ "$SECONDS" -lt "$deadline" ] || { cmd_down; die "not ready within 120 s (log: $DIR/dev-cluster.log)"; }
    sleep 0.2
  done
  echo "dev-cluster: ready at $(cat "$DIR/ready") with ${#crds[@]} CRD file(s) and $NODES simulated node(s)" >&2
  echo "dev-cluster: kubectl is $bindir/kubectl; logs in $DIR" >&2
  print_env
}

cmd_down() {
  if ! running; then
    echo "dev-cluster: not running" >&2; rm -f "$PIDFILE"; return 0
  fi
  local pid; pid="$(cat "$PIDFILE")"
  kill -TERM "$pid"
  local deadline=$((SECONDS + 30))
  while kill -0 "$pid" 2>/dev/null; do
    if [ "$SECONDS" -ge "$deadline" ]; then kill -KILL "$pid" 2>/dev/null || true; break; fi
    sleep 0.1
  done
  rm -f "$PIDFILE" "$DIR/ready"
  echo "dev-cluster: stopped" >&2
}

cmd_status() {
  if running && [ -f "$DIR/ready" ]; then
    echo "running: $(cat "$DIR/ready") (pid $(cat "$PIDFILE")); kubeconfig $KUBECONFIG_PATH; logs $DIR/*.log"
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
  *) echo "usage: $0 up [CRD.yaml ...] | down | env | status" >&2; exit 2 ;;
esac

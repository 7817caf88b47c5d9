#!/usr/bin/env bash
# The operator demo on a real node (root only), run by `scripts/demo.sh --node`:
#   1. scripts/dev-cluster.sh up --node: the control plane and one real node (containerd, kubelet,
#      kube-proxy, CoreDNS), the images built locally and loaded into it;
#   2. `helmfile -e local sync`: the CRDs and the four services as real pods;
#   3. a sample HTTP workload (real readiness probe) with a ConfigMap, and five Pactos with inline
#      contracts (Compliant, Compliant with a bound configuration, Unknown, Reference, Invalid);
#   4. their verdicts with `kubectl get pactos` and `kubectl describe pacto`.
# On exit (also on failure or Ctrl-C) everything is torn down and the host restored
# (scripts/dev-cluster.sh down). PACTO_DEMO_KEEP=1 keeps it running until Enter is pressed;
# `scripts/demo.sh --down` (or this script with --down) tears down one left running.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$HOME/.cargo/bin:$PATH"

say() { printf '\n==> %s\n' "$*" >&2; }
die() { echo "demo --node: error: $*" >&2; exit 1; }

if [ "${1:-}" = "--down" ]; then
  exec scripts/dev-cluster.sh down
fi
[ "$#" -eq 0 ] || die "unknown argument '$1' (usage: scripts/demo.sh --node | --down)"
[ "$(id -u)" = 0 ] || die "a real node needs root (it changes iptables, sysctls, cgroups and mounts)"

scripts/install-deps.sh --node
teardown() {
  say "tearing down the node and restoring the host (scripts/dev-cluster.sh down)"
  scripts/dev-cluster.sh down || echo "demo --node: teardown reported a problem (see above)" >&2
}
trap teardown EXIT

say "starting the control plane and the real node (scripts/dev-cluster.sh up --node)"
eval "$(scripts/dev-cluster.sh up --node)"
K8S_BIN="$(scripts/k8s-binaries.sh --print)"
TOOLS_BIN="$(scripts/chart-tools.sh --print)"
export PATH="$K8S_BIN:$TOOLS_BIN:$PATH"
kubectl get nodes -o wide

say "helmfile -e local sync (stabilization window 20s, so that an absence is confirmed quickly)"
helmfile -e local --state-values-set controller.stabilizationWindow=20s sync
kubectl -n pacto-system wait --for=condition=Available deployment --all --timeout=180s
kubectl -n pacto-system get pods -o wide

NS=pacto-demo
say "a sample workload, its ConfigMap and five Pactos in namespace $NS"
kubectl create namespace "$NS"
kubectl apply -n "$NS" -f - <<'EOF'
apiVersion: apps/v1
kind: Deployment
metadata: {name: web}
spec:
  replicas: 1
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      containers:
        - name: app
          image: localhost/pacto-sample-http:0.1
          imagePullPolicy: IfNotPresent
          ports: [{name: http, containerPort: 8080}]
          readinessProbe:
            httpGet: {path: /readyz, port: http}
            periodSeconds: 1
---
apiVersion: v1
kind: Service
metadata: {name: web}
spec:
  selector: {app: web}
  ports: [{name: http, port: 80, targetPort: http}]
---
apiVersion: v1
kind: ConfigMap
metadata: {name: web-settings}
data:
  config.yaml: "port: 8080\n"
EOF
kubectl -n "$NS" wait --for=condition=Available deployment/web --timeout=120s
kubectl apply -n "$NS" -f - <<'EOF'
apiVersion: pacto.trianalab.io/v1alpha1
kind: Pacto
metadata: {name: web}
spec:
  contractRef:
    inline: |
      pactoVersion: "2.0"
      service: {name: web, version: 1.0.0}
      interfaces:
        - {name: http, type: openapi, ref: interfaces/openapi.yaml}
  target:
    serviceName: web
    interfaceBindings:
      - {interface: http, servicePort: http}
---
apiVersion: pacto.trianalab.io/v1alpha1
kind: Pacto
metadata: {name: web-settings}
spec:
  contractRef:
    inline: |
      pactoVersion: "2.0"
      service: {name: web, version: 1.0.0}
      configurations:
        - name: app
          required: true
          schema: '{"type":"object","required":["port"],"properties":{"port":{"type":"integer"}}}'
  target:
    serviceName: web
    configBindings:
      - {configuration: app, kind: ConfigMap, name: web-settings, key: config.yaml, format: yaml}
---
apiVersion: pacto.trianalab.io/v1alpha1
kind: Pacto
metadata: {name: ghost}
spec:
  contractRef:
    inline: |
      pactoVersion: "2.0"
      service: {name: ghost, version: 1.0.0}
      interfaces:
        - {name: http, type: openapi, ref: interfaces/openapi.yaml}
  target:
    serviceName: ghost
    interfaceBindings:
      - {interface: http, servicePort: http}
---
apiVersion: pacto.trianalab.io/v1alpha1
kind: Pacto
metadata: {name: catalog}
spec:
  contractRef:
    inline: |
      pactoVersion: "2.0"
      service: {name: catalog, version: 1.2.0}
---
apiVersion: pacto.trianalab.io/v1alpha1
kind: Pacto
metadata: {name: broken}
spec:
  contractRef:
    inline: |
      pactoVersion: "2.0"
      service: {name: broken, version: not-a-version}
EOF

status_of() { kubectl get pacto -n "$NS" "$1" -o jsonpath='{.status.contractStatus}'; }
wait_status() {
  local name="$1" want="$2" deadline=$((SECONDS + 120)) got=""
  until got="$(status_of "$name")"; [ "$got" = "$want" ]; do
    [ "$SECONDS" -lt "$deadline" ] || die "Pacto $name: not $want within 120 s (last: '${got:-none}')"
    sleep 1
  done
}
wait_status web Compliant
wait_status web-settings Compliant
wait_status ghost Unknown
wait_status catalog Reference
wait_status broken Invalid

say "kubectl get pactos -n $NS"
kubectl get pactos -n "$NS"
say "kubectl describe pacto web -n $NS"
kubectl describe pacto web -n "$NS"
say "kubectl describe pacto ghost -n $NS"
kubectl describe pacto ghost -n "$NS"

if [ -n "${PACTO_DEMO_KEEP:-}" ]; then
  say "running; in another shell: export KUBECONFIG=$KUBECONFIG PATH=$K8S_BIN:\$PATH; press Enter to stop"
  read -r _
fi
say "node demo complete"

#!/usr/bin/env bash
# The operator demo on a real node (root only), run by `scripts/demo.sh --node`:
#   1. scripts/dev-cluster.sh up --node: the control plane and one real node (containerd, kubelet,
#      kube-proxy, CoreDNS), the images built locally and loaded into it;
#   2. `helmfile -e local sync` with the node agent on (nodeAgent.enabled=true; its TLS follows the
#      local environment's tls.mode, insecure, so no cert-manager): the CRDs, the four services and
#      the agent's DaemonSet as real pods. The API server's default Pod Security level is
#      restricted; helmfile's presync hook labels the agent namespace privileged first;
#   3. a sample HTTP workload (real readiness probe, restricted-compliant) with a ConfigMap, and six
#      Pactos with inline contracts (Compliant, Compliant with a bound configuration, Unknown,
#      Reference, Invalid, and one whose interface port nothing listens on);
#   4. their verdicts with `kubectl get pactos` and `kubectl describe pacto`;
#   5. the node half: the finding about the port nothing listens on, decided by the node agent's
#      view (collector k8s-observer+ebpf, waited for with a deadline), then the troubleshooting
#      guide's three node-agent commands and their output.
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

# The operator's namespace: the local environment's `namespace`.
OP_NS="$(sed -n 's/^namespace:[[:space:]]*//p' charts/environments/local.yaml)"
[ -n "$OP_NS" ] || die "no namespace in charts/environments/local.yaml"
AGENT_NS=pacto-node-agent

# Log level info (the local environment's is debug): the guide's `grep node-agent` then shows the
# operator's node-agent lines, not every debug line of a request URL naming the agent namespace.
say "helmfile -e local sync with the node agent (stabilization window 20s, so that an absence is confirmed quickly; the agent publishes every 5s; log level info)"
helmfile -e local \
  --state-values-set controller.stabilizationWindow=20s \
  --state-values-set logLevel=info \
  --state-values-set nodeAgent.enabled=true \
  --state-values-set nodeAgent.publishInterval=5s \
  sync
kubectl -n "$OP_NS" wait --for=condition=Available deployment --all --timeout=180s
kubectl -n "$OP_NS" get pods -o wide
kubectl -n "$AGENT_NS" rollout status daemonset/pacto-node-agent --timeout=180s
if kubectl -n "$AGENT_NS" get events | grep FailedCreate; then
  die "the agent's pods were refused (FailedCreate above): the namespace was not labelled in time"
fi
echo "node agent: DaemonSet Ready, no FailedCreate in $AGENT_NS; namespace labels:"
kubectl get namespace "$AGENT_NS" -o jsonpath='{.metadata.labels}{"\n"}'

NS=pacto-demo
say "a sample workload, its ConfigMap and six Pactos in namespace $NS"
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
      # Pod Security restricted: the node's default level.
      securityContext: {runAsNonRoot: true, seccompProfile: {type: RuntimeDefault}}
      containers:
        - name: app
          image: localhost/pacto-sample-http:0.1
          imagePullPolicy: IfNotPresent
          securityContext: {allowPrivilegeEscalation: false, capabilities: {drop: [ALL]}}
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
# The same pods behind a port nothing in them listens on: Kubernetes sees Ready endpoints, only
# the node agent sees that no socket listens on 9000.
apiVersion: v1
kind: Service
metadata: {name: web-admin}
spec:
  selector: {app: web}
  ports: [{name: admin, port: 9000, targetPort: 9000}]
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
metadata: {name: web-admin}
spec:
  contractRef:
    inline: |
      pactoVersion: "2.0"
      service: {name: web-admin, version: 1.0.0}
      interfaces:
        - {name: admin, type: openapi, ref: interfaces/admin.yaml}
  target:
    serviceName: web-admin
    interfaceBindings:
      - {interface: admin, servicePort: admin}
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

# The node half: the finding about interface admin, whose port nothing listens on, decided by the
# node agent's view of the pod's sockets once the stabilization window has passed.
admin_finding() {
  kubectl get pacto -n "$NS" web-admin -o jsonpath='{range .status.findings[?(@.subject=="interface/admin")]}{.code} {.evidenceRefs[0].collector}{end}'
}
deadline=$((SECONDS + 180)); got=""
until got="$(admin_finding)"; [ "$got" = "INTERFACE_ABSENT k8s-observer+ebpf" ]; do
  [ "$SECONDS" -lt "$deadline" ] || die "Pacto web-admin: no INTERFACE_ABSENT from k8s-observer+ebpf within 180 s (last: '${got:-none}')"
  sleep 1
done
say "the node agent's finding: Pacto web-admin, interface admin (Service port 9000, nothing listens)"
kubectl get pacto -n "$NS" web-admin \
  -o jsonpath='{.status.contractStatus}{"\n"}{range .status.findings[*]}{.code} {.subject} collector={.evidenceRefs[0].collector}: {.message}{"\n"}{end}'
kubectl get pacto -n "$NS" web-admin -o jsonpath='{.status.findings}' | python3 -m json.tool 2>/dev/null \
  || kubectl get pacto -n "$NS" web-admin -o jsonpath='{.status.findings}{"\n"}'

# The troubleshooting guide's three node-agent commands (docs/troubleshooting.md, "Node agent
# evidence is missing"), verbatim.
say "kubectl -n pacto-node-agent get daemonset pacto-node-agent"
kubectl -n pacto-node-agent get daemonset pacto-node-agent
say "kubectl -n pacto-node-agent get noderuntimeobservations,leases"
kubectl -n pacto-node-agent get noderuntimeobservations,leases
say "kubectl -n pacto-operator-system logs deploy/pacto-operator | grep node-agent"
kubectl -n pacto-operator-system logs deploy/pacto-operator | grep node-agent \
  || echo "demo --node: the guide's third command printed no node-agent line (see above)" >&2

if [ -n "${PACTO_DEMO_KEEP:-}" ]; then
  say "running; in another shell: export KUBECONFIG=$KUBECONFIG PATH=$K8S_BIN:\$PATH; press Enter to stop"
  read -r _
fi
say "node demo complete"

#!/usr/bin/env bash
# Operator demo: the whole pipeline on this machine, no cluster or container runtime needed.
#
#   1. a local control plane (etcd + kube-apiserver + kube-controller-manager + the workload
#      simulator, via scripts/dev-cluster.sh) with the Pacto CRDs;
#   2. a docker-registry on loopback, and sample contracts pushed with `pacto push`;
#   3. a CA and one certificate per service identity (openssl), and the four services
#      (contract-resolver, observer, evaluator, status-writer) as background processes talking
#      mutual TLS;
#   4. sample workloads and Pactos applied with kubectl; then `kubectl get pactos` and
#      `kubectl describe pacto` are printed.
#
# Everything (processes, cluster, temp dir) is stopped and removed on exit. Set
# PACTO_DEMO_KEEP=1 to keep it running until you press Enter (KUBECONFIG is printed).
#
# Needs: cargo, Go (first run builds the Kubernetes binaries: scripts/k8s-binaries.sh),
# docker-registry, openssl, curl, python3 (scripts/install-deps.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD

say() { printf '\n\033[1m==> %s\033[0m\n' "$*" >&2; }
die() { echo "demo-operator: error: $*" >&2; exit 1; }

REGISTRY_BIN=${PACTO_DOCKER_REGISTRY_BIN:-$(command -v docker-registry || echo /usr/bin/docker-registry)}
[ -x "$REGISTRY_BIN" ] || die "docker-registry not found: run scripts/install-deps.sh"
command -v openssl >/dev/null || die "openssl not found: run scripts/install-deps.sh"

WORK=$(mktemp -d "${TMPDIR:-/tmp}/pacto-operator-demo.XXXXXX")
PIDS=()
CLUSTER_UP=""
cleanup() {
  local rc=$?
  set +e
  if [ "$rc" -ne 0 ] && [ -d "$WORK/logs" ]; then
    echo "demo-operator: failed (exit $rc); last lines of the service logs:" >&2
    for f in "$WORK"/logs/*.log; do echo "--- $f" >&2; tail -n 15 "$f" >&2; done
  fi
  local pid
  for pid in "${PIDS[@]}"; do kill "$pid" 2>/dev/null; done
  for pid in "${PIDS[@]}"; do wait "$pid" 2>/dev/null; done
  if [ -n "$CLUSTER_UP" ]; then
    PACTO_DEV_DIR="$WORK/cluster" scripts/dev-cluster.sh down >/dev/null 2>&1
  fi
  rm -rf "$WORK"
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1]); s.close()'; }

# Waits (deadline in seconds) until "$@" succeeds.
wait_until() {
  local what=$1 seconds=$2; shift 2
  local deadline=$((SECONDS + seconds))
  until "$@" >/dev/null 2>&1; do
    [ "$SECONDS" -lt "$deadline" ] || die "timed out after ${seconds}s waiting for $what"
    sleep 0.2
  done
}

say "building the pacto CLI and the four services"
cargo build -q -p pacto -p pacto-contract-resolver -p pacto-observer -p pacto-evaluator -p pacto-status-writer --bins
TARGET="$(cargo metadata --format-version 1 --no-deps | sed -n 's/.*"target_directory":"\([^"]*\)".*/\1/p')/debug"
pacto() { "$TARGET/pacto" "$@"; }

say "starting the control plane (scripts/dev-cluster.sh, state in $WORK/cluster)"
CLUSTER_UP=1
eval "$(PACTO_DEV_DIR="$WORK/cluster" PACTO_DEV_NODES=1 scripts/dev-cluster.sh up)"
export KUBECONFIG
KUBECTL="$(scripts/k8s-binaries.sh --print)/kubectl"
kubectl() { "$KUBECTL" "$@"; }

say "starting docker-registry on loopback"
REG_PORT=$(free_port)
REGISTRY="127.0.0.1:$REG_PORT"
mkdir -p "$WORK/registry" "$WORK/logs"
cat >"$WORK/registry.yml" <<EOF
version: 0.1
log:
  level: warn
  accesslog:
    disabled: true
storage:
  filesystem:
    rootdirectory: $WORK/registry
http:
  addr: $REGISTRY
  secret: pacto-operator-demo
EOF
"$REGISTRY_BIN" serve "$WORK/registry.yml" >"$WORK/logs/registry.log" 2>&1 &
PIDS+=($!)
wait_until "the registry" 20 curl -fsS "http://$REGISTRY/v2/"
export PACTO_INSECURE_REGISTRIES="$REGISTRY"
export XDG_CACHE_HOME="$WORK/cache"

say "pushing sample contracts to $REGISTRY"
# payments: the Compliant example. Every runtime assertion it declares (an HTTP interface, a
# health capability, a required configuration with a schema, the workload type) is satisfied by
# the Service, Deployment and ConfigMap applied below, so its Compliant rests on 4/4 assertions.
mkdir -p "$WORK/contracts/payments/interfaces" "$WORK/contracts/payments/configuration"
cat >"$WORK/contracts/payments/pacto.yaml" <<'EOF'
pactoVersion: "2.0"
service:
  name: payments
  version: 1.0.0
  owner: { team: payments }
interfaces:
  - name: http
    type: openapi
    ref: interfaces/openapi.yaml
capabilities:
  - type: health
    binding: { type: http, interface: http, path: /healthz }
configurations:
  - name: settings
    schema: configuration/schema.json
    required: true
workload: service
EOF
cat >"$WORK/contracts/payments/interfaces/openapi.yaml" <<'EOF'
openapi: 3.0.3
info: { title: payments, version: 1.0.0 }
paths:
  /payments:
    post:
      responses:
        "201": { description: payment accepted }
  /healthz:
    get:
      responses:
        "200": { description: healthy }
EOF
cat >"$WORK/contracts/payments/configuration/schema.json" <<'EOF'
{
  "$schema": "https://json-schema.org/draft/2020-12/schema",
  "type": "object",
  "required": ["currency", "timeoutMs"],
  "properties": {
    "currency": { "type": "string", "pattern": "^[A-Z]{3}$" },
    "timeoutMs": { "type": "integer", "minimum": 100 }
  }
}
EOF
pacto validate "$WORK/contracts/payments"
pacto push "$WORK/contracts/payments" "oci://$REGISTRY/demo/payments"
pacto push tests/fixtures/contracts/valid/spec-7.1-stateless-http-api "oci://$REGISTRY/demo/orders-api"
pacto push tests/fixtures/contracts/valid/spec-7.3-reference-library "oci://$REGISTRY/demo/money-lib"

say "generating a CA and one certificate per service identity (mTLS)"
TLS="$WORK/tls"
mkdir -p "$TLS"
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 1 \
  -subj "/CN=pacto demo CA" -keyout "$TLS/ca-key.pem" -out "$TLS/ca.pem" 2>/dev/null
for svc in contract-resolver observer evaluator status-writer; do
  openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -subj "/CN=$svc.pacto.svc" \
    -keyout "$TLS/$svc-key.pem" -out "$TLS/$svc.csr" 2>/dev/null
  # The DNS name (server name) and the URI SAN the default allow-lists admit
  # (docs/design/identity.md).
  printf 'subjectAltName=DNS:%s.pacto.svc,URI:spiffe://pacto/ns/pacto-operator-system/sa/pacto-%s\nextendedKeyUsage=serverAuth,clientAuth\nkeyUsage=digitalSignature\n' "$svc" "$svc" >"$TLS/$svc.ext"
  openssl x509 -req -in "$TLS/$svc.csr" -CA "$TLS/ca.pem" -CAkey "$TLS/ca-key.pem" -CAcreateserial \
    -days 1 -extfile "$TLS/$svc.ext" -out "$TLS/$svc.pem" 2>/dev/null
done

say "starting the four services (mTLS; the admin kubeconfig of the local cluster)"
NS=pacto-demo
kubectl create namespace "$NS" >/dev/null
declare -A GRPC ADMIN
for svc in contract-resolver observer evaluator status-writer; do
  GRPC[$svc]="127.0.0.1:$(free_port)"
  ADMIN[$svc]="127.0.0.1:$(free_port)"
done
start_service() {
  local svc=$1; shift
  "$TARGET/pacto-$svc" --admin-addr "${ADMIN[$svc]}" --log-format text \
    --tls-ca "$TLS/ca.pem" --tls-cert "$TLS/$svc.pem" --tls-key "$TLS/$svc-key.pem" "$@" \
    >"$WORK/logs/$svc.log" 2>&1 &
  PIDS+=($!)
}
start_service contract-resolver --listen-addr "${GRPC[contract-resolver]}" --insecure-registries "$REGISTRY"
start_service observer --listen-addr "${GRPC[observer]}" --watch-namespace "$NS" --stabilization-window 10s
start_service evaluator --listen-addr "${GRPC[evaluator]}"
start_service status-writer --watch-namespace "$NS" --pod-name status-writer-demo \
  --resolver-addr "${GRPC[contract-resolver]}" --resolver-server-name contract-resolver.pacto.svc \
  --observer-addr "${GRPC[observer]}" --observer-server-name observer.pacto.svc \
  --evaluator-addr "${GRPC[evaluator]}" --evaluator-server-name evaluator.pacto.svc
for svc in contract-resolver observer evaluator status-writer; do
  wait_until "$svc /readyz" 60 curl -fsS "http://${ADMIN[$svc]}/readyz"
  echo "  $svc ready (admin http://${ADMIN[$svc]}/metrics)" >&2
done

say "applying sample workloads (made Running/Ready by the simulator) and Pactos in namespace $NS"
kubectl apply -n "$NS" -f - <<'EOF'
# payments: a Deployment whose container serves port "http" with an httpGet readiness probe on
# the health path, a Service exposing that port, and the ConfigMap bound to its configuration.
apiVersion: apps/v1
kind: Deployment
metadata: {name: payments}
spec:
  replicas: 2
  selector: {matchLabels: {app: payments}}
  template:
    metadata: {labels: {app: payments}}
    spec:
      containers:
        - name: app
          image: registry.local/payments:1.0.0
          ports: [{name: http, containerPort: 8080}]
          readinessProbe:
            httpGet: {path: /healthz, port: http}
---
apiVersion: v1
kind: Service
metadata: {name: payments}
spec:
  selector: {app: payments}
  ports: [{name: http, port: 80, targetPort: http}]
---
apiVersion: v1
kind: ConfigMap
metadata: {name: payments-settings}
data:
  settings.yaml: |
    currency: EUR
    timeoutMs: 2500
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: orders-api}
spec:
  replicas: 1
  selector: {matchLabels: {app: orders-api}}
  template:
    metadata: {labels: {app: orders-api}}
    spec: {containers: [{name: app, image: registry.local/orders-api:3.4.1}]}
EOF
kubectl wait -n "$NS" --for=condition=Available deployment/payments deployment/orders-api --timeout=90s
kubectl apply -n "$NS" -f - <<EOF
apiVersion: pacto.trianalab.io/v1alpha1
kind: Pacto
metadata: {name: payments}
spec:
  contractRef: {oci: "oci://$REGISTRY/demo/payments"}
  target:
    serviceName: payments
    workloadRef: {kind: Deployment, name: payments}
    interfaceBindings:
      - {interface: http, servicePort: http}
    configBindings:
      - {configuration: settings, kind: ConfigMap, name: payments-settings, key: settings.yaml, format: yaml}
---
apiVersion: pacto.trianalab.io/v1alpha1
kind: Pacto
metadata: {name: orders-api}
spec:
  contractRef: {oci: "oci://$REGISTRY/demo/orders-api"}
  target: {serviceName: orders-api}
---
apiVersion: pacto.trianalab.io/v1alpha1
kind: Pacto
metadata: {name: money-lib}
spec:
  contractRef: {oci: "oci://$REGISTRY/demo/money-lib:0.9.0-rc.2"}
---
apiVersion: pacto.trianalab.io/v1alpha1
kind: Pacto
metadata: {name: broken}
spec:
  contractRef:
    inline: |
      pactoVersion: "2.0"
      service:
        name: broken
        version: not-a-version
  target: {serviceName: broken}
EOF

has_status() { [ -n "$(kubectl get pacto -n "$NS" "$1" -o jsonpath='{.status.contractStatus}')" ]; }
is_status() { [ "$(kubectl get pacto -n "$NS" "$1" -o jsonpath='{.status.contractStatus}')" = "$2" ]; }
for p in orders-api money-lib broken; do wait_until "a status on Pacto $p" 60 has_status "$p"; done
wait_until "Pacto payments to be Compliant" 60 is_status payments Compliant
# Compliant must rest on evidence: every declared assertion evaluated, and the target present.
coverage=$(kubectl get pacto -n "$NS" payments -o jsonpath='{.status.evaluationCoverage.evaluated}/{.status.evaluationCoverage.required}')
[ "$coverage" = "4/4" ] || die "Pacto payments is Compliant with coverage $coverage, expected 4/4"
exists=$(kubectl get pacto -n "$NS" payments -o jsonpath='{.status.resources.service.exists}')
[ "$exists" = "true" ] || die "Pacto payments is Compliant but its Service exists=$exists"

say "kubectl get pactos -n $NS"
kubectl get pactos -n "$NS"

say "kubectl describe pacto payments -n $NS"
kubectl describe pacto payments -n "$NS"

say "kubectl describe pacto orders-api -n $NS   (worked example 7.1 of docs/design/contract.md#worked-examples against a bare Deployment)"
kubectl describe pacto orders-api -n "$NS"

say "pacto_contract_status from the status-writer's admin port"
curl -fsS "http://${ADMIN[status-writer]}/metrics" | grep '^pacto_contract_status{' | grep ' 1$' || true

if [ -n "${PACTO_DEMO_KEEP:-}" ]; then
  say "running; in another shell: export KUBECONFIG=$KUBECONFIG; press Enter to stop"
  read -r _
fi
say "operator demo complete"

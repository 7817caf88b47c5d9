#!/usr/bin/env bash
# Contract demo: validates the example contracts (the worked examples of docs/design/contract.md#worked-examples from the fixture
# corpus), then round-trips one bundle through a real OCI registry (Debian's docker-registry on
# loopback): `pacto push` (tag = service.version), `pacto inspect`, `pacto pull`, a byte-for-byte
# diff against the source, and `pacto validate oci://…`. Everything runs in a temp dir that is
# removed on exit, together with the registry process.
#
# Needs: docker-registry (scripts/install-deps.sh), curl, cargo. PACTO_BIN overrides the binary.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD

say() { printf '\n\033[1m==> %s\033[0m\n' "$*" >&2; }

if [ -z "${PACTO_BIN:-}" ]; then
  say "building the pacto CLI"
  cargo build -q -p pacto
  PACTO_BIN="$ROOT/target/debug/pacto"
fi
pacto() { "$PACTO_BIN" "$@"; }

REGISTRY_BIN=${PACTO_DOCKER_REGISTRY_BIN:-$(command -v docker-registry || echo /usr/bin/docker-registry)}
[ -x "$REGISTRY_BIN" ] || { echo "docker-registry not found: run scripts/install-deps.sh" >&2; exit 1; }

WORK=$(mktemp -d "${TMPDIR:-/tmp}/pacto-demo.XXXXXX")
REGISTRY_PID=""
cleanup() {
  if [ -n "$REGISTRY_PID" ]; then
    kill "$REGISTRY_PID" 2>/dev/null || true
    wait "$REGISTRY_PID" 2>/dev/null || true
  fi
  rm -rf "$WORK"
}
trap cleanup EXIT INT TERM

EXAMPLES="$ROOT/tests/fixtures/contracts"
say "validating the example contracts (local-only: ref policies are reported, not fetched)"
for ex in valid/spec-7.1-stateless-http-api valid/spec-7.2-stateful-store valid/spec-7.3-reference-library; do
  pacto validate --offline "$EXAMPLES/$ex"
done
say "an example that fails layer 1 and one that fails layer 2 (exit code 1 expected)"
for ex in invalid/spec-7.4-layer1 invalid/spec-7.5-layer2; do
  set +e
  pacto validate --offline "$EXAMPLES/$ex"
  rc=$?
  set -e
  [ "$rc" -eq 1 ] || { echo "expected exit 1 for $ex, got $rc" >&2; exit 1; }
done
echo "JSON form:" >&2
pacto validate --offline --output json "$EXAMPLES/invalid/spec-7.4-layer1" || true

say "starting docker-registry on loopback"
PORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1]); s.close()')
HOST="127.0.0.1:$PORT"
mkdir -p "$WORK/registry"
cat >"$WORK/registry.yml" <<EOF
version: 0.1
log:
  level: warn
  accesslog:
    disabled: true
storage:
  filesystem:
    rootdirectory: $WORK/registry
  delete:
    enabled: true
http:
  addr: $HOST
  secret: pacto-demo
EOF
"$REGISTRY_BIN" serve "$WORK/registry.yml" >"$WORK/registry.log" 2>&1 &
REGISTRY_PID=$!
deadline=$((SECONDS + 20))
until curl -fsS "http://$HOST/v2/" >/dev/null 2>&1; do
  if ! kill -0 "$REGISTRY_PID" 2>/dev/null || [ "$SECONDS" -ge "$deadline" ]; then
    echo "docker-registry did not start; log:" >&2
    cat "$WORK/registry.log" >&2
    exit 1
  fi
  sleep 0.1
done
echo "registry ready at $HOST" >&2
export PACTO_INSECURE_REGISTRIES="$HOST"
export XDG_CACHE_HOME="$WORK/cache"   # keep the demo's bundle cache inside the temp dir

SRC="$EXAMPLES/valid/spec-7.1-stateless-http-api"
REPO="oci://$HOST/demo/orders-api"
say "pacto push $SRC $REPO   (no tag: service.version is used)"
PUSHED=$(pacto push "$SRC" "$REPO")
echo "$PUSHED"

say "pacto inspect"
pacto inspect "${PUSHED%@*}"

say "pacto pull $REPO   (untagged: highest semver tag)"
pacto pull "$REPO" -o "$WORK/pulled"

say "byte-for-byte comparison of the pulled bundle with the source"
diff -r "$SRC" "$WORK/pulled"
echo "identical" >&2

say "pacto validate $REPO"
pacto validate --no-cache "$REPO"

say "demo complete"

#!/usr/bin/env bash
# Provides the upstream PolicyReport CRD (wgpolicyk8s.io/v1alpha2 policyreports) for the
# status-writer's PolicyReport test (services/status-writer/tests/policy_report.rs): the CRD as
# Kyverno ships it in its Go module (config/crds/policyreport/wgpolicyk8s.io_policyreports.yaml),
# taken from the pinned module version with `go mod download` (checksum database checked), copied
# into a cache directory keyed by that version. The module itself goes to a throwaway module
# cache that is removed afterwards. The YAML is never committed to this repository.
#
#   scripts/policy-report-crd.sh          fetch if missing, print the CRD file's path on stdout
#   scripts/policy-report-crd.sh --print  print the path without fetching (exit 1 if missing)
#
# The test reads the file from $PACTO_POLICY_REPORT_CRD (scripts/test.sh exports the printed
# path) or, when it is unset, from the same default cache path.
#
# Environment:
#   PACTO_CACHE                  cache root (default: $HOME/.cache/pacto)
#   PACTO_POLICY_REPORT_MODULE   the Go module shipping the CRD (default below)
#   PACTO_POLICY_REPORT_VERSION  its version (default below; must match the test's default path)
set -euo pipefail

MODULE="${PACTO_POLICY_REPORT_MODULE:-github.com/kyverno/kyverno}"
VERSION="${PACTO_POLICY_REPORT_VERSION:-v1.19.1}"
FILE_IN_MODULE="config/crds/policyreport/wgpolicyk8s.io_policyreports.yaml"
CACHE="${PACTO_CACHE:-${HOME:-/root}/.cache/pacto}"
ROOT="$CACHE/policy-report-crd/kyverno-$VERSION"
CRD="$ROOT/wgpolicyk8s.io_policyreports.yaml"

log() { echo "policy-report-crd: $*" >&2; }
die() { printf "policy-report-crd: error: %b\n" "$*" >&2; exit 1; }

PRINT=0
for arg in "$@"; do
  case "$arg" in
    --print) PRINT=1 ;;
    *) die "unknown argument '$arg' (usage: scripts/policy-report-crd.sh [--print])" ;;
  esac
done

if [ "$PRINT" = 1 ]; then
  [ -s "$CRD" ] || die "$CRD is missing; run scripts/policy-report-crd.sh"
  echo "$CRD"; exit 0
fi
if [ -s "$CRD" ]; then echo "$CRD"; exit 0; fi

if ! command -v go >/dev/null 2>&1 && [ -x /usr/local/go/bin/go ]; then export PATH="$PATH:/usr/local/go/bin"; fi
command -v go >/dev/null 2>&1 || die "the 'go' command is not on PATH; install Go to fetch the PolicyReport CRD"

mkdir -p "$ROOT"
exec 9>"$ROOT/.lock"
flock 9
if [ -s "$CRD" ]; then echo "$CRD"; exit 0; fi

modcache="$(mktemp -d "$ROOT/modcache.XXXXXX")"
# The module cache is read-only unless asked otherwise; make it removable.
cleanup() { rm -rf "$modcache"; }
trap cleanup EXIT
log "downloading $MODULE@$VERSION (once; cached in $ROOT)"
dir="$(cd "$ROOT" && GOWORK=off GOFLAGS=-modcacherw GOMODCACHE="$modcache" \
  go mod download -json "$MODULE@$VERSION" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",\{0,1\}$/\1/p')"
[ -n "$dir" ] && [ -s "$dir/$FILE_IN_MODULE" ] \
  || die "$MODULE@$VERSION has no $FILE_IN_MODULE"
grep -q '^  name: policyreports.wgpolicyk8s.io$' "$dir/$FILE_IN_MODULE" \
  || die "$dir/$FILE_IN_MODULE is not the policyreports.wgpolicyk8s.io CRD"
cp "$dir/$FILE_IN_MODULE" "$CRD.tmp"
chmod 0644 "$CRD.tmp"
mv "$CRD.tmp" "$CRD"
log "CRD ready: $CRD"
echo "$CRD"

#!/usr/bin/env bash
# Builds the pinned cosign (Go module github.com/sigstore/cosign/v2, the release the release
# workflow installs with sigstore/cosign-installer) once into a cache directory keyed by version,
# and prints the binary's path on stdout. The release signing test (tests/charts/tests/
# release_signing.rs) signs and verifies with it; `scripts/release.sh --sign` finds cosign on PATH.
#
#   scripts/cosign.sh           build if missing, print the binary's path
#   scripts/cosign.sh --print   print the path without building (exit 1 if missing)
#
# The build is `go install -trimpath` of the module at the pinned version, its dependencies checked
# against the go.sum it ships and the module against the Go checksum database (GOFLAGS=-mod=readonly,
# GOSUMDB never off), as scripts/chart-tools.sh builds helm.
#
# Environment: PACTO_CACHE (default $HOME/.cache/pacto), PACTO_COSIGN_VERSION (default below).
set -euo pipefail

VERSION="${PACTO_COSIGN_VERSION:-v2.6.1}"
CACHE="${PACTO_CACHE:-${HOME:-/root}/.cache/pacto}"
DIR="$CACHE/cosign/$VERSION"
BIN="$DIR/cosign"

die() { printf "cosign: error: %b\n" "$*" >&2; exit 1; }

case "${1:-}" in
  --print) [ -x "$BIN" ] || die "no cosign at $BIN; run scripts/cosign.sh"; echo "$BIN"; exit 0 ;;
  "") ;;
  *) die "unknown argument '$1' (usage: scripts/cosign.sh [--print])" ;;
esac

if [ ! -x "$BIN" ]; then
  if ! command -v go >/dev/null 2>&1 && [ -x /usr/local/go/bin/go ]; then export PATH="$PATH:/usr/local/go/bin"; fi
  command -v go >/dev/null 2>&1 || die "the 'go' command is not on PATH; install Go to build cosign"
  [ "$(go env GOSUMDB)" != off ] || die "GOSUMDB=off: the Go checksum database must verify the modules"
  for v in GONOSUMDB GOPRIVATE GOINSECURE; do
    [ -z "$(go env "$v" 2>/dev/null)" ] || die "$v is set ($(go env "$v")): unset it, every module must be verified"
  done
  mkdir -p "$DIR"
  exec 9>"$DIR/.lock"
  flock 9
  if [ ! -x "$BIN" ]; then
    echo "cosign: building github.com/sigstore/cosign/v2/cmd/cosign@$VERSION (once)" >&2
    t0=$SECONDS
    GOFLAGS=-mod=readonly GOWORK=off CGO_ENABLED=0 GOBIN="$DIR/.tmp" go install -trimpath \
      -ldflags="-s -w -X sigs.k8s.io/release-utils/version.gitVersion=$VERSION" \
      "github.com/sigstore/cosign/v2/cmd/cosign@$VERSION" >&2 \
      || die "go install of cosign $VERSION failed"
    mv "$DIR/.tmp/cosign" "$BIN"
    rmdir "$DIR/.tmp" 2>/dev/null || true
    echo "cosign: built in $((SECONDS - t0)) s" >&2
  fi
fi
echo "$BIN"

#!/usr/bin/env bash
# Builds the pinned workflow linter actionlint (Go module github.com/rhysd/actionlint) once into a
# cache directory keyed by version, and prints the binary's path on stdout.
#
#   scripts/actionlint.sh           build if missing, print the binary's path
#   scripts/actionlint.sh --print   print the path without building (exit 1 if missing)
#   scripts/actionlint.sh --run     build if missing, then lint .github/workflows/*.yml (scripts/test.sh)
#
# Environment: PACTO_CACHE (default $HOME/.cache/pacto), PACTO_ACTIONLINT_VERSION (default below).
set -euo pipefail

VERSION="${PACTO_ACTIONLINT_VERSION:-v1.7.12}"
CACHE="${PACTO_CACHE:-${HOME:-/root}/.cache/pacto}"
DIR="$CACHE/actionlint/$VERSION"
BIN="$DIR/actionlint"
REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"

die() { printf "actionlint: error: %b\n" "$*" >&2; exit 1; }

case "${1:-}" in
  --print) [ -x "$BIN" ] || die "no actionlint at $BIN; run scripts/actionlint.sh"; echo "$BIN"; exit 0 ;;
  --run|"") ;;
  *) die "unknown argument '$1' (usage: scripts/actionlint.sh [--print|--run])" ;;
esac

if [ ! -x "$BIN" ]; then
  if ! command -v go >/dev/null 2>&1 && [ -x /usr/local/go/bin/go ]; then export PATH="$PATH:/usr/local/go/bin"; fi
  command -v go >/dev/null 2>&1 || die "the 'go' command is not on PATH; install Go to build actionlint"
  mkdir -p "$DIR"
  exec 9>"$DIR/.lock"
  flock 9
  if [ ! -x "$BIN" ]; then
    echo "actionlint: building github.com/rhysd/actionlint/cmd/actionlint@$VERSION (once)" >&2
    GOBIN="$DIR/.tmp" go install "github.com/rhysd/actionlint/cmd/actionlint@$VERSION" >&2 \
      || die "go install of actionlint $VERSION failed"
    mv "$DIR/.tmp/actionlint" "$BIN"
    rmdir "$DIR/.tmp" 2>/dev/null || true
  fi
fi

if [ "${1:-}" = --run ]; then
  cd "$REPO"
  # shellcheck and pyflakes are used for `run:` scripts when they are installed.
  "$BIN" -no-color .github/workflows/*.yml
  echo "actionlint: $(ls .github/workflows/*.yml | wc -l) workflows clean" >&2
else
  echo "$BIN"
fi

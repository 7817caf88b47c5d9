#!/usr/bin/env bash
# Refuses, under CI (CI set and not "0" or "false"), every environment variable that would make
# the test run skip a tier, weaken a check or rewrite checked-in files instead of comparing them:
# a CI run must fail rather than pass by skipping. Off CI they stay available to developers.
# scripts/test.sh runs this first; tests/charts/tests/layout.rs runs it with each variable.
#
#   scripts/ci-env.sh     exit 0, or exit 1 naming every refused variable
set -euo pipefail

case "${CI:-}" in
  "" | 0 | false) exit 0 ;;
esac

refused=()
check() { # name, value that is refused (or "set" for any non-empty value), why
  local name="$1" bad="$2" why="$3" value="${!1:-}"
  if [ "$bad" = set ] && [ -n "$value" ] && [ "$value" != 0 ]; then
    refused+=("$name=$value ($why)")
  elif [ "$bad" != set ] && [ "$value" = "$bad" ]; then
    refused+=("$name=$value ($why)")
  fi
}
check PACTO_SKIP_DEPLOYED set "skips the deployed tier"
check PACTO_SKIP_FUZZ set "skips the fuzz tier"
check SOCKWATCH_REQUIRE_CLANG 0 "lets the node agent build fall back to the prebuilt kernel object"
check PACTO_REQUIRE_EBPF 0 "lets the privileged eBPF tier skip"
for name in PACTO_UPDATE_GOLDEN PACTO_UPDATE_DOCS PACTO_UPDATE_CHARTS PACTO_UPDATE_RELEASED; do
  check "$name" set "rewrites checked-in files instead of comparing them"
done

if [ "${#refused[@]}" -gt 0 ]; then
  echo "error: under CI (CI=${CI}) these would let the run pass without checking everything:" >&2
  printf '  %s\n' "${refused[@]}" >&2
  exit 1
fi

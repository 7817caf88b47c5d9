#!/usr/bin/env bash
# The project's whole test suite, from a fresh machine: installs system packages, builds (or reuses)
# the pinned Kubernetes control-plane binaries, then runs formatting, lints and every test tier.
# Each step prints a banner so a failure is easy to place.
#
# What needs root:
# - one end-to-end scenario (tests/e2e, the health probe in evidence.rs): its observer runs under
#   `unshare --mount` with a private /etc/hosts;
# - the deployed tier (`tests/deployed`, package pacto-deployed): a real node (containerd, kubelet,
#   kube-proxy, CoreDNS) that changes global host state while it runs (iptables, a bridge, cgroups,
#   sysctls, mounts) and restores it afterwards. As root this script also installs the node packages
#   (`scripts/install-deps.sh --node`), builds the node binaries (`scripts/k8s-binaries.sh --node`)
#   and the images (`scripts/node-images.sh`), and runs the deployed tier alone, after every other
#   tier. PACTO_SKIP_DEPLOYED=1 skips it explicitly.
# Without root each of them prints one "skipped: needs root (...)" line and passes; under CI (`CI=1`,
# set by .ci/run, which runs as root) they fail instead of skipping.
#
# The fuzz tier (scripts/fuzz.sh, after the workspace tests) installs the nightly toolchain and
# cargo-fuzz when missing; PACTO_SKIP_FUZZ=1 skips it. It runs a fixed seed and a fixed
# number of runs per target (PACTO_FUZZ_RUNS_SCALE multiplies them).
set -euo pipefail
cd "$(dirname "$0")/.."

step() { printf '\n==> %s (%s)\n' "$1" "$(date -u +%H:%M:%S)" >&2; }

# Under CI nothing may be skipped or regenerated: PACTO_SKIP_*, SOCKWATCH_REQUIRE_CLANG=0,
# PACTO_REQUIRE_EBPF=0 and PACTO_UPDATE_* make the run fail here instead (scripts/ci-env.sh).
scripts/ci-env.sh

# A clean build writes several GB under target/; say so up front rather than fail in the linker.
# Incremental state only helps rebuilds, which a clean checkout never does.
export CARGO_INCREMENTAL="${CARGO_INCREMENTAL:-0}"
# The build metadata every binary carries (/version, `pacto version`; services/runtime/build-info.rs),
# fixed for the whole run as scripts/release.sh fixes it, so the release rehearsal of the deployed
# tier reuses the test build instead of rebuilding the services with other values.
PACTO_BUILD_COMMIT="${PACTO_BUILD_COMMIT:-$(git rev-parse HEAD 2>/dev/null || echo unknown)}"
SOURCE_DATE_EPOCH="${SOURCE_DATE_EPOCH:-$(git log -1 --format=%ct HEAD 2>/dev/null || echo 0)}"
export PACTO_BUILD_COMMIT SOURCE_DATE_EPOCH
target_dir="${CARGO_TARGET_DIR:-target}"
mkdir -p "$target_dir"
free_kib="$(df -Pk "$target_dir" | awk 'NR == 2 { print $4 }')"
step "disk: $((free_kib / 1024 / 1024)) GiB free for $target_dir (a clean build needs about 5 GiB)"
if [ "$free_kib" -lt $((5 * 1024 * 1024)) ]; then
    echo "warning: less than 5 GiB free under $target_dir; the build may fail with 'No space left on device'" >&2
fi

deployed=0
if [ "$(id -u)" = 0 ] && [ "${PACTO_SKIP_DEPLOYED:-0}" != 1 ]; then deployed=1; fi

step "system packages"
if [ "$deployed" = 1 ]; then scripts/install-deps.sh --node; else scripts/install-deps.sh; fi

if [ "$deployed" = 1 ]; then
  step "kubernetes control-plane and node binaries (built once, cached by version)"
  PACTO_K8S_BIN="$(scripts/k8s-binaries.sh --node)"
else
  step "kubernetes control-plane binaries (built once, cached by version)"
  PACTO_K8S_BIN="$(scripts/k8s-binaries.sh)"
fi
export PACTO_K8S_BIN

step "registry tools: go-containerregistry registry (Referrers API) and oras (built once, cached by version)"
started=$SECONDS
PACTO_REGISTRY_TOOLS="$(scripts/registry-tools.sh)"
export PACTO_REGISTRY_TOOLS
step "registry tools ready in $((SECONDS - started)) s: $PACTO_REGISTRY_TOOLS"

step "PolicyReport CRD: wgpolicyk8s.io policyreports from the pinned Kyverno Go module (fetched once, cached by version)"
PACTO_POLICY_REPORT_CRD="$(scripts/policy-report-crd.sh)"
export PACTO_POLICY_REPORT_CRD

step "chart tools: helm, helmfile, kubectl, kubernetes-validate (cached)"
PACTO_CHART_TOOLS="$(scripts/chart-tools.sh)"
export PACTO_CHART_TOOLS

# The node agent's kernel program is built from source (no silent fallback to the committed object)
# and, as root, its privileged tier must run (services/node-agent/tests/privileged.rs); off root
# that tier skips in one line (and fails under CI). Either may be overridden.
if [ "$(id -u)" = 0 ]; then require_ebpf=1; else require_ebpf=0; fi
export SOCKWATCH_REQUIRE_CLANG="${SOCKWATCH_REQUIRE_CLANG:-1}" PACTO_REQUIRE_EBPF="${PACTO_REQUIRE_EBPF:-$require_ebpf}"

step "actionlint over .github/workflows (pinned, built once: scripts/actionlint.sh)"
scripts/actionlint.sh --run

step "cargo fmt --check"
cargo fmt --all --check

step "cargo clippy --all-targets -- -D warnings"
cargo clippy --workspace --all-targets -- -D warnings

step "cargo test --workspace --exclude pacto-deployed"
cargo test --workspace --exclude pacto-deployed --no-fail-fast

# arm64 (docs/images.md#architectures): the CLI and the node agent cross-built for aarch64 (debug,
# reused on a warm target directory), run under qemu-user, and the kernel program's CO-RE
# relocations checked against Debian's arm64 kernel BTF. Off root without the packages it skips in
# one line; under CI it fails instead.
step "arm64 smoke: aarch64 CLI and node agent under qemu-user, kernel program on arm64 BTF (scripts/arm64-smoke.sh)"
started=$SECONDS
if [ "$(id -u)" = 0 ]; then scripts/install-deps.sh --arm64-smoke; fi
scripts/arm64-smoke.sh
step "arm64 smoke passed in $((SECONDS - started)) s"

# Fuzz tier (fuzz/README.md): builds the fuzz targets with nightly + cargo-fuzz (installed once,
# cached by version) and runs each with a fixed seed and run count under a 256 MiB memory limit.
if [ "${PACTO_SKIP_FUZZ:-0}" = 1 ]; then
  step "fuzz tier skipped (PACTO_SKIP_FUZZ=1)"
else
  step "fuzz tier: every fuzz target, fixed seed and run count (scripts/fuzz.sh)"
  started=$SECONDS
  scripts/fuzz.sh
  step "fuzz tier passed in $((SECONDS - started)) s"
fi

if [ "$deployed" = 1 ]; then
  step "node images (built once per content; the service images come from the release rehearsal)"
  PACTO_NODE_IMAGES="$(scripts/node-images.sh --node-only)"
  export PACTO_NODE_IMAGES
  step "deployed tier on a real node (root; alone, after the other tiers): release rehearsal to a local registry, install from it"
  started=$SECONDS
  cargo test -p pacto-deployed -- --nocapture
  step "deployed tier passed in $((SECONDS - started)) s"
elif [ "${PACTO_SKIP_DEPLOYED:-0}" = 1 ]; then
  step "deployed tier skipped (PACTO_SKIP_DEPLOYED=1)"
else
  step "deployed tier (not root: it prints why it skips, or fails under CI)"
  cargo test -p pacto-deployed
fi

step "all tests passed"

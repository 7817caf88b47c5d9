#!/usr/bin/env bash
# Installs the system packages the tests and the demo use. Idempotent; safe to run repeatedly.
# Add a package here (not in ad-hoc places) when a test starts needing it.
#
#   scripts/install-deps.sh          packages for the unit, cluster and e2e tiers and the process demo
#   scripts/install-deps.sh --node   also the real node's packages (containerd, runc, CNI plugins, iptables)
#                                    and the image tools (buildah, busybox-static, gcc for the pause image)
#   scripts/install-deps.sh --cross  also the arm64 cross toolchain a multi-arch release builds with
#                                    (scripts/cross.sh: gcc and glibc for aarch64)
#   scripts/install-deps.sh --arm64-smoke
#                                    the cross toolchain, qemu-user and bpftool: the arm64 smoke test
#                                    (scripts/arm64-smoke.sh, a step of scripts/test.sh)
#
# Tools built from Go modules are not packages: scripts/k8s-binaries.sh (control plane, node) and
# scripts/registry-tools.sh (the Referrers-API registry and oras for the evidence-store tests);
# scripts/test.sh runs both.
set -euo pipefail
APT_PACKAGES=(docker-registry apache2-utils skopeo prometheus unzip jq python3-venv python3-pip openssl curl clang llvm libbpf-dev man-db groff-base)
NODE_PACKAGES=(containerd runc containernetworking-plugins iptables buildah busybox-static gcc libc6-dev)
CROSS_PACKAGES=(gcc-aarch64-linux-gnu binutils-aarch64-linux-gnu libc6-dev-arm64-cross)
ARM64_SMOKE_PACKAGES=("${CROSS_PACKAGES[@]}" qemu-user bpftool)

for arg in "$@"; do
  case "$arg" in
    --node) APT_PACKAGES+=("${NODE_PACKAGES[@]}") ;;
    --cross) APT_PACKAGES+=("${CROSS_PACKAGES[@]}") ;;
    --arm64-smoke) APT_PACKAGES+=("${ARM64_SMOKE_PACKAGES[@]}") ;;
    *) echo "install-deps: error: unknown argument '$arg' (usage: scripts/install-deps.sh [--node] [--cross] [--arm64-smoke])" >&2; exit 2 ;;
  esac
done

missing=()
for p in "${APT_PACKAGES[@]}"; do
  dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
done
if [ "${#missing[@]}" -gt 0 ]; then
  echo "install-deps: installing ${missing[*]}" >&2
  SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  $SUDO apt-get update -qq || { echo "install-deps: error: apt-get update failed" >&2; exit 1; }
  if ! DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"; then
    # name each package that is still missing, one line each, so the failure is clear
    for p in "${missing[@]}"; do
      dpkg -s "$p" >/dev/null 2>&1 || echo "install-deps: error: package '$p' could not be installed" >&2
    done
    exit 1
  fi
fi

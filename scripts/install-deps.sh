#!/usr/bin/env bash
# Installs the system packages the tests and the demo use. Idempotent; safe to run repeatedly.
# Add a package here (not in ad-hoc places) when a test starts needing it.
set -euo pipefail
APT_PACKAGES=(docker-registry apache2-utils skopeo prometheus unzip jq python3-venv python3-pip openssl curl)
missing=()
for p in "${APT_PACKAGES[@]}"; do
  dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
done
if [ "${#missing[@]}" -gt 0 ]; then
  echo "install-deps: installing ${missing[*]}" >&2
  SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

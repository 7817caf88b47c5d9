#!/usr/bin/env bash
# The local demo from a fresh machine. Today it exercises the contract foundation end to end:
# validates the bundled example contracts and round-trips one through a real local OCI registry.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$HOME/.cargo/bin:$PATH"
scripts/install-deps.sh
exec scripts/demo-contract.sh "$@"

#!/usr/bin/env bash
# The local demo from a fresh machine:
#   1. the contract foundation (scripts/demo-contract.sh): validates the bundled example contracts
#      and round-trips one through a real local OCI registry;
#   2. the operator (scripts/demo-operator.sh): a local control plane, a registry with sample
#      contracts, the four services over mTLS, sample workloads and Pactos, then
#      `kubectl get pactos` and `kubectl describe pacto`.
# Arguments are passed to the contract demo.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$HOME/.cargo/bin:$PATH"
scripts/install-deps.sh
scripts/demo-contract.sh "$@"
exec scripts/demo-operator.sh

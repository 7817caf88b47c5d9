#!/usr/bin/env bash
# The local demo from a fresh machine:
#   1. the contract foundation (scripts/demo-contract.sh): validates the bundled example contracts
#      and round-trips one through a real local OCI registry;
#   2. the operator (scripts/demo-operator.sh): a local control plane, a registry with sample
#      contracts, the four services over mTLS, sample workloads and Pactos, then
#      `kubectl get pactos` and `kubectl describe pacto`.
# Arguments are passed to the contract demo.
#
#   scripts/demo.sh --node   the operator on a real node instead (root only; scripts/demo-node.sh):
#                            node up (Pod Security restricted by default), images loaded,
#                            `helmfile -e local sync` with the node agent on, demo Pactos and
#                            their verdicts, a finding the node agent decided (collector
#                            k8s-observer+ebpf) and the guide's node-agent commands, then
#                            everything torn down and the host restored
#   scripts/demo.sh --down   tear down a node demo left running (PACTO_DEMO_KEEP, a killed run)
set -euo pipefail
cd "$(dirname "$0")/.."
case "${1:-}" in
  --node) shift; exec scripts/demo-node.sh "$@" ;;
  --down) exec scripts/demo-node.sh --down ;;
esac
export PATH="$HOME/.cargo/bin:$PATH"
scripts/install-deps.sh
scripts/demo-contract.sh "$@"
exec scripts/demo-operator.sh

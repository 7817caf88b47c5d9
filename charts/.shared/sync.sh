#!/usr/bin/env bash
# Copies the parts every Pacto service chart shares from charts/.shared into each service chart:
#   templates/*           -> charts/<chart>/templates/ (identical files)
#   values-common.yaml    -> the tail of charts/<chart>/values.yaml, after the marker line
#   schema-common.json    -> merged (jq '*') with schema-<chart>.json into charts/<chart>/values.schema.json
# Run it after editing anything under charts/.shared; tests/charts fails when a chart has drifted.
set -euo pipefail
cd "$(dirname "$0")"
MARKER="# ==== shared values: edit charts/.shared/values-common.yaml, then run charts/.shared/sync.sh ===="
CHARTS=(pacto-evaluator pacto-contract-resolver pacto-observer pacto-status-writer)
command -v jq >/dev/null || { echo "sync.sh: jq is required (apt-get install -y jq)" >&2; exit 1; }
for chart in "${CHARTS[@]}"; do
  dir="../$chart"
  mkdir -p "$dir/templates"
  cp templates/* "$dir/templates/"
  head="$(sed "/^${MARKER//\//\\/}\$/,\$d" "$dir/values.yaml")"
  { printf '%s\n\n%s\n' "$head" "$MARKER"; cat values-common.yaml; } > "$dir/values.yaml.new"
  mv "$dir/values.yaml.new" "$dir/values.yaml"
  jq -s '.[0] * .[1]' schema-common.json "schema-$chart.json" > "$dir/values.schema.json"
done
echo "synced: ${CHARTS[*]}"

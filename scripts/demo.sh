#!/usr/bin/env bash
# Sets up a fresh machine (scripts/setup.sh) and runs the demo:
#   1. the profile → swap → verify → report workflow on a Llama model built from a config
#      (report and chart in swap-report.md / swap-report.png);
#   2. every op of the registry, eager and under torch.compile(fullgraph=True), against ATen.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
VENV="${TORCH_NKI_VENV:-.venv}"
"$VENV/bin/torch-nki" swap --model llama-tiny --report swap-report.md
exec "$VENV/bin/torch-nki" demo "$@"

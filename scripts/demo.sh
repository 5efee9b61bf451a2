#!/usr/bin/env bash
# Sets up a fresh machine (scripts/setup.sh) and runs the demo:
#   1. the profile → swap → verify → report workflow on a Llama model built from a config
#      (report and chart in swap-report.md / swap-report.png);
#   2. every op of the registry, eager and under torch.compile(fullgraph=True), against ATen.
# Only their own output: other libraries' log lines are captured (`bash scripts/demo.sh -v` shows
# them).
set -euo pipefail
cd "$(dirname "$0")/.."
# `-v` (passed on to `torch-nki demo`) also shows what is captured: pip's log inside the setup's
# `maturin develop`, the profiler's log lines in the swap step.
for arg in "$@"; do
    if [[ "$arg" == "-v" || "$arg" == "--verbose" ]]; then
        export TORCH_NKI_VERBOSE=1
    fi
done
bash scripts/setup.sh
VENV="${TORCH_NKI_VENV:-.venv}"
"$VENV/bin/torch-nki" swap --model llama-tiny --report swap-report.md
exec "$VENV/bin/torch-nki" demo "$@"

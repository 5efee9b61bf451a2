#!/usr/bin/env bash
# Sets up a fresh machine (scripts/setup.sh) and runs the demo: prints the kernel registry, then
# runs every op eager and under torch.compile(fullgraph=True) against ATen.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
VENV="${TORCH_NKI_VENV:-.venv}"
exec "$VENV/bin/torch-nki" demo "$@"

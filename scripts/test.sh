#!/usr/bin/env bash
# Sets up a fresh machine (scripts/setup.sh) and runs every test the project has:
# rustfmt and clippy, cargo tests (unit, integration, trybuild, insta snapshots, README doctest),
# the ATen fixture freshness check, ruff, mypy over python/torch_nki and scripts/tie_wheel.py, the
# pytest suites, then the wheels (scripts/wheel_smoke.sh: one per torch minor from
# constraints/smoke-torch*.txt, each installed in a fresh virtualenv and tested there without the
# toolchain on PATH, the older minors also with the smoke suite; about 6 min per minor, mostly
# downloading torch). TORCH_NKI_SKIP_WHEELS=1 skips the wheels. Each step's header says how many
# seconds the script had run when it began, so a slow CI run shows where its time went.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
VENV="${TORCH_NKI_VENV:-.venv}"
# shellcheck disable=SC1091
source "$VENV/bin/activate"

step() { printf '\n== %s (at %ds)\n' "$*" "$SECONDS"; }

step "cargo fmt --check"
cargo fmt --all -- --check
step "cargo clippy (all targets, warnings are errors)"
cargo clippy --workspace --all-targets -- -D warnings
step "template kernel crate (examples/kernel-crate): fmt and clippy"
cargo fmt --manifest-path examples/kernel-crate/Cargo.toml -- --check
cargo clippy --manifest-path examples/kernel-crate/Cargo.toml --all-targets -- -D warnings
step "cargo test (unit, integration, trybuild, insta, doctests)"
cargo test --workspace
step "ruff"
ruff check python tests examples scripts
ruff format --check python tests examples scripts
step "mypy (python/torch_nki and scripts/tie_wheel.py, configured in python/pyproject.toml)"
mypy --config-file python/pyproject.toml python/torch_nki scripts/tie_wheel.py
step "ATen reference fixtures are reproducible"
python tests/reference/generate.py --check
step "pytest"
set +e
python -m pytest tests/python -q
rc=$?
set -e
if [ "$rc" -eq 5 ]; then
    echo "pytest collected no tests: the suite is missing" >&2
    exit 1
fi
if [ "$rc" -ne 0 ]; then
    exit "$rc"
fi
if [[ "${TORCH_NKI_SKIP_WHEELS:-0}" == "1" ]]; then
    step "wheels: skipped (TORCH_NKI_SKIP_WHEELS=1)"
    exit 0
fi
step "wheels: built per torch minor, installed in fresh virtualenvs, tested there (scripts/wheel_smoke.sh)"
bash scripts/wheel_smoke.sh

#!/usr/bin/env bash
# Sets up the Python side of torch-nki from a fresh clone, idempotently:
#   1. a virtualenv at $TORCH_NKI_VENV (default: <repo>/.venv), created with `python3 -m venv` if missing;
#   2. what constraints/dev.in lists (torch, numpy, ml_dtypes, matplotlib, pytest, maturin, ruff,
#      mypy, transformers) from PyPI, at the versions constraints/dev.txt pins (`bash
#      scripts/lock.sh` refreshes them); pip skips what is already installed at those versions;
#   3. the native module and the `torch_nki` package, built in release mode and installed editable
#      (`maturin develop --release`), which also installs the `torch-nki` console script and the
#      `torch.backends` entry point that makes `import torch` register torch.ops.neuron.*.
#
# Environment:
#   TORCH_NKI_VENV        where the virtualenv lives (default: <repo>/.venv)
#   PYTHON                the interpreter that creates it (default: python3)
#   TORCH_INDEX_URL       an extra pip index for torch (e.g. https://download.pytorch.org/whl/cpu);
#                         by default torch comes from PyPI
#   TORCH_NKI_SKIP_BUILD  set to 1 to only prepare the virtualenv
#   TORCH_NKI_VERBOSE     set to 1 to see pip's log inside `maturin develop` (quiet by default)
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
venv="${TORCH_NKI_VENV:-$repo/.venv}"
python="${PYTHON:-python3}"

say() { printf '==> %s\n' "$*"; }

if ! command -v cargo >/dev/null 2>&1; then
    echo "setup.sh: cargo not found; install a Rust toolchain (rustup) first" >&2
    exit 1
fi

if [[ -x "$venv/bin/python" ]]; then
    say "using the existing virtualenv $venv"
else
    say "creating a virtualenv at $venv ($("$python" --version 2>&1))"
    "$python" -m venv "$venv"
fi
vpy="$venv/bin/python"

say "upgrading pip"
"$vpy" -m pip install --quiet --disable-pip-version-check --upgrade pip

torch_args=()
if [[ -n "${TORCH_INDEX_URL:-}" ]]; then
    torch_args=(--extra-index-url "$TORCH_INDEX_URL")
fi
# Pinned (constraints/dev.txt) so that a new release of torch, transformers or a linter cannot
# change a build that passed until the pins are refreshed on purpose.
say "installing constraints/dev.in at the versions of constraints/dev.txt${TORCH_INDEX_URL:+ (torch index: $TORCH_INDEX_URL)}"
"$vpy" -m pip install --quiet --disable-pip-version-check "${torch_args[@]}" \
    -r "$repo/constraints/dev.in" -c "$repo/constraints/dev.txt"

if [[ "${TORCH_NKI_SKIP_BUILD:-0}" == "1" ]]; then
    say "TORCH_NKI_SKIP_BUILD=1: not building the native module"
    exit 0
fi

say "building and installing torch_nki (maturin develop --release -m python/Cargo.toml)"
# pip's resolver log (one line per requirement already satisfied) is not ours to print: pip runs
# quiet inside maturin unless TORCH_NKI_VERBOSE=1; cargo's progress stays.
pip_quiet=1
if [[ "${TORCH_NKI_VERBOSE:-0}" != "0" ]]; then
    pip_quiet=0
fi
(
    cd "$repo"
    VIRTUAL_ENV="$venv" PATH="$venv/bin:$PATH" PIP_QUIET="$pip_quiet" \
        "$venv/bin/maturin" develop --release -m python/Cargo.toml
)

say "compiling the fast C++ kernels against the installed torch (torch-nki fast)"
(cd "$repo" && "$vpy" -m torch_nki fast)

say "checking the install"
(cd "$repo" && "$vpy" -c 'import torch, torch_nki; print("torch", torch.__version__, "| torch.ops.neuron:", ", ".join(torch_nki.ops()))')
say "done: activate with 'source $venv/bin/activate', run the tests with '$vpy -m pytest tests/python -q'"

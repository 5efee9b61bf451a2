#!/usr/bin/env bash
# Builds torch-nki wheels that carry the fast C++ kernels prebuilt for one torch minor version each:
#
#   bash scripts/build_wheel.sh [--python PY]... [--out DIR]
#
#   1. `maturin build --release` builds the package once (the Rust native module is abi3: one
#      build serves every Python >= 3.10 and every torch);
#   2. for each PY (default: the setup's virtualenv, $TORCH_NKI_VENV or <repo>/.venv),
#      scripts/tie_wheel.py, run by PY, compiles the fast C++ kernels against PY's torch and
#      writes DIR/torch_nki-<version>+torch<X.Y>-cp310-abi3-linux_x86_64.whl, which requires
#      torch==X.Y.* (DIR defaults to <repo>/dist), and prints its path.
#
# Building needs cargo, maturin (the setup's virtualenv has it; or $MATURIN) and a C++20
# compiler; installing and running the wheels needs none of them. The wheels are tagged
# `linux_x86_64`: the C++ library is linked on this machine, so they suit machines with this
# machine's glibc and libstdc++ or newer.
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
venv="${TORCH_NKI_VENV:-$repo/.venv}"
out="$repo/dist"
pythons=()

usage() {
    echo "usage: bash scripts/build_wheel.sh [--python PY]... [--out DIR]" >&2
    exit 2
}
while [[ $# -gt 0 ]]; do
    case "$1" in
        --python) [[ $# -ge 2 ]] || usage; pythons+=("$2"); shift 2 ;;
        --out) [[ $# -ge 2 ]] || usage; out="$2"; shift 2 ;;
        -h | --help) sed -n '2,16p' "$0"; exit 0 ;;
        *) echo "build_wheel.sh: unknown argument $1" >&2; usage ;;
    esac
done
if [[ ${#pythons[@]} -eq 0 ]]; then
    pythons=("$venv/bin/python")
fi
for py in "${pythons[@]}"; do
    if [[ -z "$("$py" -c 'import torch; print(torch.__version__)' 2>/dev/null)" ]]; then
        echo "build_wheel.sh: $py cannot import torch (each --python needs the torch to build against)" >&2
        exit 1
    fi
done
maturin="${MATURIN:-$venv/bin/maturin}"
if [[ ! -x "$maturin" ]]; then
    maturin="$(command -v maturin || true)"
fi
if [[ -z "$maturin" ]]; then
    echo "build_wheel.sh: maturin not found (run scripts/setup.sh, or set \$MATURIN)" >&2
    exit 1
fi

base_dir="$(mktemp -d "${TMPDIR:-/tmp}/torch-nki-base-wheel.XXXXXX")"
trap 'rm -rf "$base_dir"' EXIT
printf '==> %s\n' "maturin build --release (the torch-independent base wheel)"
(cd "$repo" && "$maturin" build --release --compatibility linux --interpreter "${pythons[0]}" \
    -m python/Cargo.toml --out "$base_dir")
base=("$base_dir"/torch_nki-*.whl)
if [[ ${#base[@]} -ne 1 || ! -f "${base[0]}" ]]; then
    echo "build_wheel.sh: expected one wheel from maturin in $base_dir, found: ${base[*]}" >&2
    exit 1
fi
mkdir -p "$out"
for py in "${pythons[@]}"; do
    printf '==> %s\n' "compiling the fast C++ kernels against $("$py" -c 'import torch; print("torch", torch.__version__)') ($py)"
    "$py" "$repo/scripts/tie_wheel.py" "${base[0]}" "$out"
done

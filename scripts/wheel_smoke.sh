#!/usr/bin/env bash
# Builds torch-nki wheels and tests each, installed, in a fresh virtualenv per torch minor version:
#
#   bash scripts/wheel_smoke.sh [X.Y]...     (default: every constraints/smoke-torch<X.Y>.txt)
#
# For each torch minor X.Y, newest first:
#   1. a fresh virtualenv $TORCH_NKI_SMOKE_DIR/torch-X.Y (default: <repo>/.venvs) with torch and
#      constraints/smoke.in at the versions of constraints/smoke-torch<X.Y>.txt;
#   2. scripts/build_wheel.sh builds the wheel tied to that torch (torch==X.Y.*) and pip installs it;
#   3. tests/wheel runs with PATH holding only the virtualenv's bin and a directory of links to
#      core utilities (no cargo, rustc or C++ compiler, checked first): the prebuilt fast path is
#      in use, with no warning, and eager, autograd, aot_eager compile, swap, emit, cost, the NKI
#      frontend and the CLI work;
#   4. for every minor but the newest (whose full test suite scripts/test.sh runs in .venv), the
#      smoke suite: the registry-wide modules of tests/python listed in SMOKE_TESTS below (every
#      op eager, compiled with Inductor, backward, opcheck; swap on a tiny Llama), against the
#      installed wheel, with the normal PATH (Inductor compiles C++);
#   5. for every minor but the newest, the newest minor's wheel installed in its place
#      (--no-deps): no compiler on PATH, so the ops run their Python kernels, and importing
#      torch_nki prints exactly one line, which says so;
#   6. the virtualenv is deleted (each holds ~5 GB of CUDA torch).
# The wheels are left in $TORCH_NKI_SMOKE_DIR/dist. Needs what scripts/build_wheel.sh needs
# (run scripts/setup.sh first) and PyPI; scripts/test.sh runs it.
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
python="${PYTHON:-python3}"
smoke_dir="${TORCH_NKI_SMOKE_DIR:-$repo/.venvs}"
dist="$smoke_dir/dist"
constraints="$repo/constraints"

# The registry-wide modules of tests/python that make the smoke suite of an older torch.
SMOKE_TESTS=(
    tests/python/test_eager.py
    tests/python/test_compile.py
    tests/python/test_autograd.py
    tests/python/test_opcheck.py
    tests/python/test_swap.py
)
# What the toolchain-free PATH links to (and nothing else).
CORE_UTILS=(env sh bash cat ls mkdir rm cp mv ln dirname basename readlink uname id true false sed grep
    head tail wc sort tr mktemp date sleep)
TOOLCHAIN=(c++ g++ gcc cc clang cargo rustc)

say() { printf '\n==> %s\n' "$*"; }

minors=("$@")
if [[ ${#minors[@]} -eq 0 ]]; then
    for f in "$constraints"/smoke-torch*.txt; do
        [[ -f "$f" ]] || continue
        f="${f##*/smoke-torch}"
        minors+=("${f%.txt}")
    done
fi
if [[ ${#minors[@]} -eq 0 ]]; then
    echo "wheel_smoke.sh: no constraints/smoke-torch<X.Y>.txt (run scripts/lock.sh)" >&2
    exit 1
fi
mapfile -t minors < <(printf '%s\n' "${minors[@]}" | sort -t. -k1,1nr -k2,2nr)
newest="${minors[0]}"
for minor in "${minors[@]}"; do
    if [[ ! -f "$constraints/smoke-torch$minor.txt" ]]; then
        echo "wheel_smoke.sh: no constraints/smoke-torch$minor.txt (torch $minor is not locked; run scripts/lock.sh)" >&2
        exit 1
    fi
done

toolbin="$(mktemp -d "${TMPDIR:-/tmp}/torch-nki-toolbin.XXXXXX")"
venv=""
cleanup() {
    rm -rf "$toolbin"
    if [[ -n "$venv" ]]; then rm -rf "$venv"; fi
}
trap cleanup EXIT
for tool in "${CORE_UTILS[@]}"; do
    ln -s "$(command -v "$tool")" "$toolbin/$tool"
done

# run_bare VENV CMD...: CMD with an environment of HOME, LANG and a PATH without the toolchain.
run_bare() {
    local v="$1"
    shift
    env -i HOME="$HOME" LANG=C.UTF-8 PATH="$v/bin:$toolbin" "$@"
}

mkdir -p "$dist"
for minor in "${minors[@]}"; do
    venv="$smoke_dir/torch-$minor"
    pins="$constraints/smoke-torch$minor.txt"
    started=$SECONDS
    say "torch $minor: a fresh virtualenv at $venv"
    rm -rf "$venv"
    "$python" -m venv "$venv"
    torch_pin="$(grep -E '^torch==' "$pins")"
    "$venv/bin/python" -m pip install --quiet --disable-pip-version-check "$torch_pin" -r "$constraints/smoke.in" -c "$pins"

    say "torch $minor: building the wheel"
    rm -f "$dist"/torch_nki-*+torch"$minor"-*.whl
    bash "$repo/scripts/build_wheel.sh" --python "$venv/bin/python" --out "$dist"
    wheel=("$dist"/torch_nki-*+torch"$minor"-*.whl)
    "$venv/bin/python" -m pip install --quiet --disable-pip-version-check "${wheel[0]}" -c "$pins"
    ls -l "${wheel[0]}"

    say "torch $minor: the wheel without the toolchain on PATH (tests/wheel)"
    for tool in "${TOOLCHAIN[@]}"; do
        if run_bare "$venv" bash -c "command -v $tool" >/dev/null; then
            echo "wheel_smoke.sh: $tool is still on the stripped PATH" >&2
            exit 1
        fi
    done
    echo "not on PATH: ${TOOLCHAIN[*]}"
    (cd "$repo" && run_bare "$venv" python -m pytest -q -p no:cacheprovider tests/wheel)

    if [[ "$minor" != "$newest" ]]; then
        say "torch $minor: the smoke suite against the installed wheel"
        (cd "$repo" && "$venv/bin/python" -m pytest -q -p no:cacheprovider "${SMOKE_TESTS[@]}")

        say "torch $minor: the torch $newest wheel installed instead (no compiler: one line, Python kernels)"
        newest_wheel=("$dist"/torch_nki-*+torch"$newest"-*.whl)
        "$venv/bin/python" -m pip install --quiet --disable-pip-version-check --no-deps --force-reinstall \
            "${newest_wheel[0]}"
        code='import torch, torch_nki; x = torch.rand(4, 4); assert torch.equal(torch.ops.neuron.add(x, x), x + x); print("fast path:", torch_nki._fast.enabled())'
        out="$(cd "$repo" && run_bare "$venv" python -c "$code" 2>"$venv/stderr.txt")"
        err="$(cat "$venv/stderr.txt")"
        printf '%s\n%s\n' "$err" "$out"
        if [[ "$out" != "fast path: False" || "$(printf '%s\n' "$err" | wc -l)" -ne 1 ||
            "$err" != *"built for torch $newest, this is torch $minor."* ]]; then
            echo "wheel_smoke.sh: expected the Python kernels and one line naming torch $newest and $minor" >&2
            exit 1
        fi
    fi
    rm -rf "$venv"
    venv=""
    say "torch $minor: passed in $((SECONDS - started)) s"
done
say "the wheels of torch ${minors[*]} passed: $(ls "$dist")"

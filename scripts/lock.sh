#!/usr/bin/env bash
# Refreshes the pinned dependency versions in constraints/ from PyPI:
#
#   bash scripts/lock.sh
#
#   constraints/dev.txt               dev.in resolved to the newest releases that install together:
#                                     the development virtualenv of scripts/setup.sh (its torch is
#                                     "the newest torch" the full test suite runs on)
#   constraints/smoke-torch<X.Y>.txt  smoke.in with torch==X.Y.*, one for every torch minor from the
#                                     floor python/pyproject.toml declares (torch>=X.Y) to the newest
#                                     (dev.txt's): the virtualenvs of scripts/wheel_smoke.sh. Where a
#                                     newest release does not support an older torch, the resolver
#                                     picks an older one for that file only.
#
# Each file lists every package pip would install, name==version, as resolved by $PYTHON
# (default python3) for this machine's Python and platform; nothing is installed. Commit the
# changed files: setup and CI then install exactly these versions, so a new PyPI release
# cannot change a build until the next refresh.
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
python="${PYTHON:-python3}"
dir="$repo/constraints"

# resolve OUT DESCRIPTION REQUIREMENT...: writes OUT with the pins pip resolves for the requirements.
resolve() {
    local out="$1" what="$2"
    shift 2
    local report
    report="$(mktemp)"
    printf '==> resolving %s\n' "$what"
    "$python" -m pip install --dry-run --ignore-installed --quiet --disable-pip-version-check \
        --report "$report" "$@"
    "$python" - "$report" "$out" "$what" <<'PY'
import json
import platform
import re
import sys

report, out, what = sys.argv[1:]
with open(report) as f:
    installs = json.load(f)["install"]
pins = sorted(
    (re.sub(r"[-_.]+", "-", item["metadata"]["name"]).lower(), item["metadata"]["version"]) for item in installs
)
python = ".".join(platform.python_version_tuple()[:2])
with open(out, "w") as f:
    f.write(f"# {what}: resolved by `bash scripts/lock.sh` for Python {python} on {platform.system().lower()}"
            f" {platform.machine()}. Do not edit by hand.\n")
    f.writelines(f"{name}=={version}\n" for name, version in pins)
print(f"    {out}: {len(pins)} packages")
PY
    rm -f "$report"
}

floor="$(grep -oE '"torch>=[0-9]+\.[0-9]+' "$repo/python/pyproject.toml" | head -n1 | cut -d= -f2)"
if [[ -z "$floor" ]]; then
    echo "lock.sh: python/pyproject.toml declares no \"torch>=X.Y\" dependency" >&2
    exit 1
fi

resolve "$dir/dev.txt" "constraints/dev.in" -r "$dir/dev.in"
newest="$(grep -oE '^torch==[0-9]+\.[0-9]+\.[0-9]+' "$dir/dev.txt" | cut -d= -f3)"
if [[ -z "$newest" ]]; then
    echo "lock.sh: constraints/dev.txt pins no torch" >&2
    exit 1
fi
newest_minor="${newest%.*}"
if [[ "${floor%%.*}" != "${newest_minor%%.*}" ]]; then
    echo "lock.sh: the torch floor $floor and the newest torch $newest differ in major version" >&2
    exit 1
fi

rm -f "$dir"/smoke-torch*.txt
major="${floor%%.*}"
for ((minor = ${floor#*.}; minor <= ${newest_minor#*.}; minor++)); do
    version="$major.$minor"
    # The newest minor gets dev.txt's torch exactly: the torch the full test suite runs on.
    torch_req="torch==$version.*"
    if [[ "$version" == "$newest_minor" ]]; then
        torch_req="torch==$newest"
    fi
    resolve "$dir/smoke-torch$version.txt" "constraints/smoke.in with $torch_req" "$torch_req" -r "$dir/smoke.in"
done
printf '==> done: review and commit constraints/ (git diff constraints/)\n'

"""The robustness suite: each script of ``tests/python/robustness/`` is one class of bad input
or hostile environment (damaged libraries, damaged and misplaced cache entries, special values,
swap faults, frontend promises, scaling, CLI errors, and fork/threads/recompiles, which hold
today), run in its own Python with a timeout. A case passes when it exits 0 having printed
``OK``; a crash (a signal), a hang (the timeout) or a wrong result (a failed assertion) fails
it with the case's output."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest

CASES = sorted((Path(__file__).parent / "robustness").glob("*.py"))
DEFAULT_TIMEOUT = 120.0


def _timeout(case: Path) -> float:
    """``# timeout: SECONDS`` in the case's first lines, else the default."""
    found = re.search(r"^# timeout: (\d+)", case.read_text(), re.MULTILINE)
    return float(found.group(1)) if found else DEFAULT_TIMEOUT


def test_the_suite_has_its_cases() -> None:
    names = {c.stem for c in CASES}
    assert {"damaged_library", "cache_entries", "special_values", "swap_faults"} <= names
    assert {"frontend_promises", "cli_errors", "held_classes"} <= names


@pytest.mark.parametrize("case", CASES, ids=[c.stem for c in CASES])
def test_case_runs_in_a_subprocess_within_its_timeout(case: Path, tmp_path: Path) -> None:
    env = {**os.environ, "TORCH_NKI_CACHE_DIR": str(tmp_path / "cache"), "TORCH_NKI_PLUGINS": ""}
    try:
        run = subprocess.run(
            [sys.executable, str(case)],
            capture_output=True,
            text=True,
            check=False,
            timeout=_timeout(case),
            cwd=tmp_path,
            env=env,
        )
    except subprocess.TimeoutExpired as err:
        pytest.fail(f"{case.name} hung: killed after {err.timeout} s\n{err.stdout or ''}{err.stderr or ''}")
    if run.returncode < 0:
        name = signal.Signals(-run.returncode).name
        pytest.fail(f"{case.name} crashed with {name}\n{run.stdout}{run.stderr[-3000:]}")
    assert run.returncode == 0, f"{case.name} failed:\n{run.stdout}{run.stderr[-3000:]}"
    assert run.stdout.rstrip().endswith("OK"), run.stdout

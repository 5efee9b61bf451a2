"""Running aws-neuron/nki-library's own test suite on torch-nki (``torch-nki nkilib-suite``).

nki-library's integration tests run in ``--test-mode simulation`` against AWS's NKI CPU
simulator package. :func:`run` runs them, from a user's checkout, on torch-nki instead: a
pytest subprocess with :data:`SHIMS` first on ``PYTHONPATH`` (``nki_cpu_simulator``, ``nki``
and the stand-ins, see ``shims/README.md``) and :mod:`torch_nki.nkilib_suite.plugin` loaded,
then reads its JUnit XML into a :class:`Report`: the counts and a table of the failures by
cause. torch-nki contains none of nki-library's code; docs/nki-library.md has the setup, the
command and the last measurement."""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from torch_nki.nkilib_suite import _kinds
from torch_nki.nkilib_suite._kinds import MEMORY, TORCH_NKI, UPSTREAM, kind

SHIMS = Path(__file__).parent / "shims"
"""The directory put first on ``PYTHONPATH`` for the suite."""

TEST_DEPENDENCIES = [
    "pandas",
    "boto3",
    "fabric2",
    "aws-embedded-metrics",
    "filelock",
    "plotext",
    "pytest-xdist",
    "pytest-metadata",
    "pytest-html",
    "pytest-timeout",
    "allpairspy",
    "scipy",
    "pyyaml",
    "ml_dtypes",
]
"""What nki-library's test framework imports (its ``test`` extra, from PyPI), plus
pytest-timeout and ml_dtypes, which the run uses."""


@dataclass
class Report:
    """The outcome of one suite run."""

    passed: list[str] = field(default_factory=list)
    failed: dict[str, str] = field(default_factory=dict)
    """Failed or erroring test → its cause (see :func:`cause`)."""
    skipped: int = 0
    collected_errors: list[str] = field(default_factory=list)

    @property
    def ran(self) -> int:
        """Tests that ran (passed or failed; the suite's own skips excluded)."""
        return len(self.passed) + len(self.failed)

    def causes(self) -> list[tuple[str, int, str]]:
        """``(cause, tests, an example test)``, most frequent first."""
        counts = Counter(self.failed.values())
        example = {c: t for t, c in reversed(list(self.failed.items()))}
        return [(c, n, example[c]) for c, n in counts.most_common()]

    def failed_by_kind(self) -> Counter[str]:
        """Failed tests per :func:`~torch_nki.nkilib_suite._kinds.kind` of their cause."""
        return Counter(kind(c) for c in self.failed.values())

    def markdown(self) -> str:
        """The counts, the failures by whose they are, and the failure table, as Markdown."""
        share = f"{100 * len(self.passed) / self.ran:.1f}%" if self.ran else "-"
        by_kind = self.failed_by_kind()
        lines = [
            f"{len(self.passed)} of {self.ran} tests that ran passed ({share}); "
            f"{self.skipped} skipped by the suite; {len(self.collected_errors)} test files did not collect.",
            "",
            f"Failures: {by_kind[TORCH_NKI]} on torch-nki's side, {by_kind[UPSTREAM]} from defects of "
            f"nki-library's published tree (they fail on any simulator), {by_kind[MEMORY]} over the "
            "run's memory limit.",
            "",
            "| tests | side | cause | example |",
            "|---:|---|---|---|",
        ]
        lines += [f"| {n} | {kind(c)} | {_cell(c)} | `{_cell(t)}` |" for c, n, t in self.causes()]
        lines += [f"| (file) | {kind(e)} | {_cell(e)} | |" for e in self.collected_errors]
        return "\n".join(lines) + "\n"


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


_NOISE = [
    (re.compile(r"0x[0-9a-f]+"), "0x…"),
    (re.compile(r"\bt\d+\b"), "tN"),
    (re.compile(r"\(/[^)]*:\d+\)"), "(…)"),
    (re.compile(r"(/[\w.-]+)+\.py:\d+"), "…"),
    (re.compile(r"\b\d+(\.\d+)?\b"), "N"),
]


def cause(message: str) -> str:
    """A failure's cause: the innermost exception line of its message with addresses, paths
    and numbers blanked, so failures of one cause group together. A memory error anywhere in
    the message is the cause (a negative test whose inputs could not be allocated ends in the
    harness's ``AssertionError`` that the kernel's own check did not fire)."""
    lines = [line.strip() for line in message.splitlines() if line.strip()]
    errors = [line for line in lines if re.match(r"^(E\s+)?[\w.]*(Error|Exception|Exit)\b", line)]
    memory = [line for line in errors if _kinds.is_memory(line)]
    innermost = memory[-1] if memory else errors[-1] if errors else lines[0] if lines else "no message"
    text = innermost.removeprefix("E").strip()
    for pattern, replacement in _NOISE:
        text = pattern.sub(replacement, text)
    return text[:200]


def read_junit(path: Path) -> Report:
    """The :class:`Report` of a pytest JUnit XML file."""
    report = Report()
    for case in ET.parse(path).getroot().iter("testcase"):
        name = f"{case.get('classname', '')}::{case.get('name', '')}"
        problem = case.find("failure")
        if problem is None:
            problem = case.find("error")
        if case.find("skipped") is not None:
            report.skipped += 1
        elif problem is not None:
            text = (problem.get("message") or "") + "\n" + (problem.text or "")
            if not case.get("classname"):
                # A file that did not collect: pytest names it in `name`, with no class.
                report.collected_errors.append(f"{case.get('name')}: {cause(text)}")
            else:
                report.failed[name] = cause(text)
        else:
            report.passed.append(name)
    return report


def environment(checkout: Path) -> dict[str, str]:
    """The environment of the pytest subprocess: the shims, then the checkout's ``src`` and
    root, on ``PYTHONPATH``."""
    env = dict(os.environ)
    paths = [str(SHIMS), str(checkout / "src"), str(checkout)]
    if env.get("PYTHONPATH"):
        paths.append(env["PYTHONPATH"])
    env["PYTHONPATH"] = os.pathsep.join(paths)
    return env


def command(
    checkout: Path,
    junit: Path,
    *,
    platform: str = "trn2",
    tests: Sequence[str] = ("test/integration",),
    select: str | None = None,
    jobs: int = 1,
    timeout: float = 600,
) -> list[str]:
    """The pytest command line of a run (``timeout`` seconds per test where pytest-timeout is
    installed)."""
    args = [
        sys.executable,
        "-m",
        "pytest",
        *tests,
        "-p",
        "torch_nki.nkilib_suite.plugin",
        "--test-mode",
        "simulation",
        "--platform-target",
        platform,
        "-q",
        "-p",
        "no:cacheprovider",
        "--continue-on-collection-errors",
        # The framework dumps every test's inputs and goldens (tens of GB over a run) unless told
        # to clean up: keep them out of the checkout and remove each test's after it.
        f"--output-directory={junit.parent / 'artifacts'}",
        "--force-local-cleanup",
        f"--junitxml={junit}",
        "-o",
        "junit_family=xunit1",
    ]
    if importlib.util.find_spec("pytest_timeout") is not None:
        args.append(f"--timeout={timeout:g}")
    if select:
        args += ["-k", select]
    if jobs > 1:
        args += ["-n", str(jobs)]
    return args


def run(
    checkout: Path,
    *,
    platform: str = "trn2",
    tests: Sequence[str] = ("test/integration",),
    select: str | None = None,
    every: int = 1,
    jobs: int = 1,
    timeout: float = 600,
    memory_gib: float | None = 8,
    log: Path | None = None,
) -> Report:
    """Runs the suite of the nki-library ``checkout`` (``tests`` under it: directories, files or
    test ids; ``-k select``,
    every ``every``-th test) and returns its :class:`Report`; pytest's output goes to
    ``log`` (default: discarded). Each pytest process (and each xdist worker) may map at most
    ``memory_gib`` GiB beyond what it maps once started (``None``: no limit), so a test that would
    exhaust the machine fails with ``MemoryError`` instead of getting the run killed."""
    if not (checkout / "test" / "conftest.py").is_file():
        raise FileNotFoundError(f"{checkout} is not an nki-library checkout (no test/conftest.py)")
    env = environment(checkout)
    env["TORCH_NKI_NKILIB_EVERY"] = str(every)
    if memory_gib is not None:
        env["TORCH_NKI_NKILIB_MEMORY_GIB"] = f"{memory_gib:g}"
    with tempfile.TemporaryDirectory() as tmp:
        junit = Path(tmp) / "junit.xml"
        args = command(
            checkout, junit, platform=platform, tests=tests, select=select, jobs=jobs, timeout=timeout
        )
        with open(log or os.devnull, "w", encoding="utf-8") as out:
            done = subprocess.run(
                args,
                cwd=checkout,
                env=env,
                stdout=out,
                stderr=subprocess.STDOUT,
                check=False,
            )
        if not junit.exists():
            how = (
                f"was killed by signal {-done.returncode} (out of memory is SIGKILL, 9; --jobs 2 "
                "lets pytest-xdist report a killed worker's test as failed and go on)"
                if done.returncode < 0
                else f"exited with code {done.returncode}; are its test dependencies installed? "
                f"pip install {' '.join(TEST_DEPENDENCIES)}"
            )
            raise RuntimeError(
                f"nki-library's pytest run wrote no results (see {log or 'the log: pass --log'}): it {how}"
            )
        return read_junit(junit)

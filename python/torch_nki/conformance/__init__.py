"""``torch-nki conformance PATH``: runs every ``@nki.jit`` kernel of a directory of NKI sources
(AWS's ``nki/examples``, nki-samples' tutorials, your own) on the frontend against the
references its drivers compare it with, and reports how far each kernel got.

    report = torch_nki.conformance.run("nki/examples")
    print(report.table()); print(report.summary())

Each file runs under :func:`torch_nki.nki.as_nki` in its own folder (see
:func:`run`); each kernel gets a :class:`KernelRow` per file that called it: the stages its
calls reached (loads, traces, validates, simulates), whether the comparisons that followed it
passed (matches), and the first error. ``docs/cli.md`` describes the rules.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from collections import Counter
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from torch_nki import nki
from torch_nki.conformance import _sandbox
from torch_nki.conformance._discover import SourceInfo, python_files, scan
from torch_nki.conformance._run import FileRun, KernelRun, relative, run_file

__all__ = ["TARGETS", "FileRun", "KernelRow", "KernelRun", "Report", "run"]

TARGETS = ("trn1", "trn2", "trn3")
"""The targets a run can default unpinned kernels to."""

NOT_CALLED = "not called by a driver"
NO_REFERENCE = "no reference"


@dataclass
class KernelRow:
    """One kernel in one file's run (or, never called, in the file defining it)."""

    file: str
    """The file that ran (relative to the corpus root)."""
    kernel: str
    defined_in: str
    loads: str
    """``"yes"``, ``"no"`` (its file failed before or while defining it) or ``"-"`` (not
    reached: the running file stopped before importing it)."""
    traces: str = "-"
    validates: str = "-"
    simulates: str = "-"
    """Each ``"yes"`` when every call passed the stage, ``"no"`` when one failed it, ``"-"`` when
    no call reached it."""
    matches: str = "-"
    """``"yes"``, ``"no"``, ``"no reference"`` (the file compared nothing after it),
    ``"not called by a driver"``, or ``"-"`` (not reached)."""
    error: str = ""
    """The first error: the kernel's own, a failed comparison, or why the file stopped."""
    calls: int = 0
    comparisons: int = 0

    @property
    def key(self) -> tuple[str, str]:
        """``(defined_in, kernel)``, the kernel's identity across rows."""
        return (self.defined_in, self.kernel)


@dataclass
class Report:
    """The result of :func:`run`: every :class:`KernelRow`, every :class:`FileRun`."""

    root: str
    target: str
    rows: list[KernelRow] = field(default_factory=list)
    files: list[FileRun] = field(default_factory=list)

    def kernels(self) -> dict[tuple[str, str], str]:
        """Each kernel's verdict over its rows: ``"yes"`` when one row matches and none fails
        (``matches`` ``"no"`` or a stage ``"no"``), ``"no"`` when one fails, else the first
        row's ``matches``."""
        verdicts: dict[tuple[str, str], str] = {}
        for row in self.rows:
            failed = row.matches == "no" or "no" in (row.loads, row.traces, row.validates, row.simulates)
            current = verdicts.get(row.key)
            if failed:
                verdicts[row.key] = "no"
            elif row.matches == "yes" and current != "no":
                verdicts[row.key] = "yes"
            elif current is None:
                verdicts[row.key] = row.matches
        return verdicts

    def missing_modules(self) -> Counter[str]:
        """How many files stopped on each missing module (by top-level package, ``nki.*``
        submodules by full name)."""
        counts: Counter[str] = Counter()
        for run in self.files:
            if run.missing:
                top = run.missing.partition(".")[0]
                counts[run.missing if top == "nki" else top] += 1
        return counts

    def summary(self) -> str:
        """``N of M kernels match; K files need missing modules (jax 5, ...)``, with how many
        kernels trace, validate and simulate in every call."""
        verdicts = self.kernels()
        matched = sum(v == "yes" for v in verdicts.values())
        passed: dict[str, set[tuple[str, str]]] = {s: set() for s in ("traces", "validates", "simulates")}
        failed: dict[str, set[tuple[str, str]]] = {s: set() for s in passed}
        for row in self.rows:
            for stage in passed:
                value = getattr(row, stage)
                if value == "yes":
                    passed[stage].add(row.key)
                elif value == "no":
                    failed[stage].add(row.key)
        reached = ", ".join(f"{len(passed[s] - failed[s])} {s[:-1]}" for s in passed)
        missing = self.missing_modules()
        needs = sum(missing.values())
        detail = f" ({', '.join(f'{m} {n}' for m, n in missing.most_common())})" if missing else ""
        not_called = sum(v == NOT_CALLED for v in verdicts.values())
        return (
            f"{matched} of {len(verdicts)} kernels match ({reached}; {not_called} not called); "
            f"{needs} of {len(self.files)} files need missing modules{detail}; target {self.target}"
        )

    def _cells(self, width: int) -> list[list[str]]:
        return [
            [
                r.file,
                r.kernel,
                r.loads,
                r.traces,
                r.validates,
                r.simulates,
                r.matches,
                _cut(r.error, width),
            ]
            for r in self.rows
        ]

    def table(self, width: int = 100) -> str:
        """The rows as an aligned text table, errors cut to ``width`` characters."""
        rows = [list(_HEADER), *self._cells(width)]
        sizes = [max(len(r[i]) for r in rows) for i in range(len(_HEADER) - 1)]
        lines = ["  ".join(c.ljust(s) for c, s in zip(r, sizes, strict=False)) + "  " + r[-1] for r in rows]
        return "\n".join(line.rstrip() for line in lines) + "\n"

    def markdown(self, width: int = 100) -> str:
        """The rows as a Markdown table (``|`` in cells escaped)."""
        lines = ["| " + " | ".join(_HEADER) + " |", "|" + "---|" * len(_HEADER)]
        for cells in self._cells(width):
            cells[0] = f"`{cells[0]}`"
            cells[1] = f"`{cells[1]}`" if cells[1] != "-" else cells[1]
            lines.append("| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |")
        return "\n".join(lines) + "\n"

    def to_json(self) -> dict[str, Any]:
        """Every record: the rows, each file's run (captured output included), the summary."""
        return {
            "root": self.root,
            "target": self.target,
            "summary": self.summary(),
            "kernels": [asdict(r) for r in self.rows],
            "files": [{**asdict(f), "seen": [list(k) for k in f.seen]} for f in self.files],
        }


_HEADER = ("file", "kernel", "loads", "traces", "validates", "simulates", "matches", "first error")


def _cut(text: str, width: int) -> str:
    return text if len(text) <= width else text[: width - 1] + "…"


def _kernel_row(run: FileRun, k: KernelRun) -> KernelRow:
    row = KernelRow(run.file, k.kernel, k.defined_in, "yes", calls=k.calls, comparisons=k.comparisons)
    row.traces, row.validates, row.simulates = (
        k.stages.get(s, "-") for s in ("trace", "validate", "simulate")
    )
    row.error = k.error
    if "no" in k.stages.values():
        return row
    if k.failed:
        row.matches = "no"
        verb = "failed" if k.failed[0].rpartition(".")[2].startswith("assert") else "returned False"
        row.error = f"{k.failed[0]} {verb}" + (
            f" ({len(k.failed)} of {k.comparisons})" if k.comparisons > 1 else ""
        )
    elif not run.completed and not (run.stopped_by and k.comparisons):
        # The file raised after this kernel ran: its own assert, or a later kernel failed before
        # this one's comparison.
        row.matches = "-" if run.stopped_by else "no"
        row.error = (
            f"not compared: the file stopped on {run.stopped_by}'s error" if run.stopped_by else run.error
        )
    elif k.comparisons == 0:
        row.matches = NO_REFERENCE
    else:
        row.matches = "yes"
    return row


def _referenced(
    run: FileRun, info: SourceInfo, siblings: dict[str, tuple[str, SourceInfo]]
) -> list[tuple[str, str]]:
    """The kernels ``run``'s file defines or imports from its folder, by its source."""
    keys = [(run.file, name) for name in info.kernels]
    for module, name in info.imports:
        found = siblings.get(module)
        if found is None:
            continue
        file, sibling = found
        keys.extend((file, k) for k in sibling.kernels if name in ("*", k))
    return list(dict.fromkeys(keys))


def build_rows(runs: list[FileRun], infos: dict[str, SourceInfo]) -> list[KernelRow]:
    """The :class:`KernelRow`\\ s of a corpus' runs (``infos`` by relative file): one per kernel
    a file called; one per kernel a file that stopped defines or imports and did not call
    (with why it stopped); one ``-`` row for a file that stopped without any; one
    ``not called by a driver`` row per kernel no file called."""
    rows: list[KernelRow] = []
    seen = {key for run in runs for key in run.seen}
    for run in runs:
        own = [_kernel_row(run, k) for k in run.kernels]
        if not run.completed:
            folder = run.file.rpartition("/")[0]
            siblings = {
                Path(f).stem: (f, i)
                for f, i in infos.items()
                if f.rpartition("/")[0] == folder and f != run.file
            }
            called = {r.key for r in own}
            for key in _referenced(run, infos[run.file], siblings):
                if key in called:
                    continue
                failed_here = key[0] == run.file or key[0] in run.error_files
                loads = "yes" if key in run.seen else "no" if failed_here else "-"
                error = (
                    f"not called: the file stopped on {run.stopped_by}'s error"
                    if run.stopped_by
                    else run.error
                )
                own.append(KernelRow(run.file, key[1], key[0], loads, error=error))
            if not own:
                own.append(KernelRow(run.file, "-", "", "no" if run.error_files else "-", error=run.error))
        rows.extend(own)
    have_row = {r.key for r in rows}
    defined = {(file, k) for file, info in infos.items() for k in info.kernels} | seen
    for key in sorted(defined - have_row):
        rows.append(KernelRow(key[0], key[1], key[0], "yes" if key in seen else "-", matches=NOT_CALLED))
    rows.sort(key=lambda r: r.file)
    return rows


def _worker_run(path: Path, root: Path, role: str, target: str, timeout: float) -> FileRun:
    """Runs one file in a child Python, killed after ``timeout`` seconds."""
    with tempfile.TemporaryDirectory(prefix="torch-nki-conformance-") as tmp:
        out = Path(tmp) / "run.json"
        command = [
            sys.executable,
            "-m",
            "torch_nki.conformance._worker",
            str(path),
            str(root),
            role,
            target,
            str(out),
        ]
        env = dict(os.environ)
        package_root = str(Path(__file__).resolve().parents[2])
        env["PYTHONPATH"] = os.pathsep.join(p for p in (package_root, env.get("PYTHONPATH", "")) if p)
        try:
            done = subprocess.run(
                command, capture_output=True, text=True, timeout=timeout, env=env, check=False
            )
        except subprocess.TimeoutExpired as e:
            run = FileRun(relative(path, root), role, error=f"timed out after {timeout:g} s")
            run.seconds = timeout
            run.output = (e.stdout or b"").decode() if isinstance(e.stdout, bytes) else (e.stdout or "")
            return run
        if not out.exists():
            run = FileRun(relative(path, root), role, error=f"worker exited with code {done.returncode}")
            run.output = done.stdout + done.stderr
            return run
        return _file_run_from_json(json.loads(out.read_text(encoding="utf-8")))


def _file_run_from_json(data: dict[str, Any]) -> FileRun:
    kernels = [KernelRun(**k) for k in data.pop("kernels")]
    seen = [(a, b) for a, b in data.pop("seen")]
    return FileRun(**data, kernels=kernels, seen=seen)


def run(
    path: str | Path,
    target: str = "trn2",
    timeout: float | None = None,
    progress: Callable[[str], None] | None = None,
) -> Report:
    """Runs every ``.py`` file of ``path`` (a file or a directory, walked sorted) and returns the
    :class:`Report`.

    Per folder, the files without a ``__main__`` block are imported first (as modules named
    after their stems, so a sibling's ``from stem import kernel`` reuses them), then the
    drivers run as ``__main__``; each with the folder first on ``sys.path``, the folder as the
    working directory, ``sys.argv == [file]``, ``import nki`` giving the frontend, a CPU
    stand-in for ``torch_xla`` where it is not installed, and ``target`` for kernels that do
    not pin one. ``sys.path``, the working directory, ``os.environ`` and the comparison
    functions are put back after each file, the folder's modules after each folder.
    With ``timeout``, each file runs in its own child Python instead, killed after that many
    seconds (siblings are then imported afresh per file). ``progress`` receives each file's
    relative path before it runs. ``FileNotFoundError`` when ``path`` does not exist,
    ``ValueError`` for an unknown target."""
    if target not in TARGETS:
        raise ValueError(f"unknown target {target!r} (known: {', '.join(TARGETS)})")
    given = Path(path)
    if not given.exists():
        raise FileNotFoundError(f"{path}: no such file or directory")
    given = given.resolve()
    root = given.parent if given.is_file() else given
    files = python_files(given)
    infos = {f.relative_to(root).as_posix(): scan(f) for f in files}
    folders: dict[Path, list[Path]] = {}
    for f in files:
        folders.setdefault(f.parent, []).append(f)
    runs: list[FileRun] = []
    for folder, members in folders.items():
        ordered = sorted(members, key=lambda f: (infos[f.relative_to(root).as_posix()].is_driver, f.name))
        with _sandbox.folder_modules(folder), nki.as_nki(), nki.default_target(target):
            for f in ordered:
                rel = f.relative_to(root).as_posix()
                info = infos[rel]
                role = "driver" if info.is_driver else "module"
                if progress is not None:
                    progress(rel)
                if info.syntax_error:
                    runs.append(FileRun(rel, role, error=info.syntax_error))
                elif timeout is not None:
                    runs.append(_worker_run(f, root, role, target, timeout))
                else:
                    runs.append(run_file(f, root, role))
    runs.sort(key=lambda r: r.file)
    return Report(str(root), target, build_rows(runs, infos), runs)

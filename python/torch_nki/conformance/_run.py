"""Running one corpus file under the frontend and recording what its kernels did: which stages
each call reached, which comparisons followed it, and how the file ended."""

from __future__ import annotations

import importlib
import importlib.util
import inspect
import re
import runpy
import sys
import time
import traceback
import types
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from torch_nki import nki
from torch_nki.conformance import _sandbox

STAGES = ("trace", "validate", "simulate")
"""The stages of a kernel call, in order (:data:`torch_nki.nki.KernelObserver`)."""


@dataclass
class KernelRun:
    """What one kernel did during one file's run (every call of it together)."""

    kernel: str
    defined_in: str
    """The file defining it, relative to the corpus root (absolute when outside it)."""
    calls: int = 0
    stages: dict[str, str] = field(default_factory=dict)
    """``"yes"`` when every call passed the stage, ``"no"`` when one failed it; a stage no call
    reached is absent."""
    error: str = ""
    """The first stage error of its calls."""
    comparisons: int = 0
    """Comparisons attributed to it (see :meth:`FileRun.attribute`)."""
    failed: list[str] = field(default_factory=list)
    """The comparison functions among them that did not pass, in order."""


@dataclass
class FileRun:
    """One file's run: how it ended, what it printed and its kernels' :class:`KernelRun`\\ s."""

    file: str
    role: str
    """``"driver"`` (has a ``__main__`` block, run as ``__main__``) or ``"module"`` (loaded)."""
    completed: bool = False
    error: str = ""
    missing: str = ""
    """The module a ``ModuleNotFoundError`` named, when that is why the file stopped."""
    stopped_by: str = ""
    """The kernel whose call raised the error the file stopped on, if it was one."""
    error_files: list[str] = field(default_factory=list)
    """Files (relative) with a module-level frame in the error's traceback: they failed to load."""
    seconds: float = 0.0
    output: str = ""
    torch_xla_shim: bool = False
    kernels: list[KernelRun] = field(default_factory=list)
    """Kernels called during the run, in the order of their first call."""
    seen: list[tuple[str, str]] = field(default_factory=list)
    """``(defined_in, kernel)`` of every kernel object that existed after the run (defined by
    the file or a module it loaded), called or not."""
    comparisons: int = 0
    unattributed: int = 0
    """Comparisons made before any kernel was called (a reference checked against itself)."""


def relative(path: str | Path, root: Path) -> str:
    """``path`` relative to ``root`` when inside it, else as given."""
    try:
        return Path(path).resolve().relative_to(root).as_posix()
    except (ValueError, OSError):
        return str(path)


def kernel_key(kernel: nki.Kernel, root: Path) -> tuple[str, str]:
    """``(defined_in, name)``: kernels are the same kernel across runs when they come from the
    same function of the same file (a driver's import and the file's own ``__main__`` run make
    two objects of one kernel)."""
    fn = inspect.unwrap(kernel.fn)
    code = getattr(fn, "__code__", None)
    file = code.co_filename if code is not None else "<unknown>"
    return (relative(file, root), kernel.__name__)


_LOCATION = re.compile(r"(?:[\w./-]+\.py|<[^>]+>):\d+")
_NOISE = (
    (re.compile(r"^trace error at \S+: (?:kernel \w+: )?"), ""),
    (re.compile(r"^validation failed (\[[\w-]+\]) at \S+ "), r"\1 "),
    (re.compile(r"^simulation failed at \S+: "), ""),
    (re.compile(r"torch_nki\.nki(?: does not implement|:) "), ""),
    (re.compile(r"; see docs/nki-frontend\.md for what is supported$"), ""),
)


def describe(error: BaseException, root: Path, base: Path | None = None) -> str:
    """``Type at file:line: message`` in short: the first line of the message, the location
    being the kernel line torch-nki errors carry (``.location`` or in the message), else the
    innermost traceback frame inside ``root``; paths relative to ``base`` (the running file's
    folder) when inside it, else to ``root``; the frontend's own boilerplate dropped. A
    ``ModuleNotFoundError`` reads ``needs X (not installed)`` (:func:`missing_reason`)."""
    if isinstance(error, ModuleNotFoundError) and error.name:
        return missing_reason(error.name)
    message = (str(error).strip().splitlines() or [""])[0]
    location = getattr(error, "location", None)
    if not isinstance(location, str) or not location:
        found = _LOCATION.search(message)
        location = found.group(0) if found else None
    if location is None:
        inside = [
            f
            for f in traceback.extract_tb(error.__traceback__)
            if Path(f.filename).resolve().is_relative_to(root)
        ]
        location = f"{inside[-1].filename}:{inside[-1].lineno}" if inside else None
    for pattern, replacement in _NOISE:
        message = pattern.sub(replacement, message)
    if location is not None:
        message = message.replace(f" ({location})", "").replace(f" at {location}", "")
        file, _, line = location.rpartition(":")
        shown = (
            relative(file, base) if base is not None and Path(file).resolve().is_relative_to(base) else None
        )
        location = f"{shown or relative(file, root)}:{line}"
    where = f" at {location}" if location else ""
    return f"{type(error).__name__}{where}: {message}" if message else f"{type(error).__name__}{where}"


def missing_reason(name: str) -> str:
    """Why a file needs ``name``: the frontend lacks an ``nki`` submodule, the CPU stand-in
    lacks a ``torch_xla`` one, or the package is not installed."""
    top = name.partition(".")[0]
    if top == "nki":
        return f"needs {name} (not in the torch_nki.nki frontend)"
    if name in _sandbox.TORCH_XLA_SHIM or top == "torch_xla":
        return f"needs {name} (not in the CPU stand-in for torch_xla)"
    try:
        installed = importlib.util.find_spec(top) is not None
    except (ImportError, ValueError):
        installed = False
    return f"needs {name} (not found)" if installed else f"needs {top} (not installed)"


class _Recorder:
    """The observer of one file's run: kernel stage events and comparisons, attributed."""

    def __init__(self, run: FileRun, root: Path) -> None:
        self.run = run
        self.root = root
        self.base = (root / run.file).parent
        self.by_key: dict[tuple[str, str], KernelRun] = {}
        self.recent: list[KernelRun] = []
        self.last: list[KernelRun] = []
        self.errors: list[tuple[KernelRun, BaseException]] = []

    def on_stage(self, kernel: nki.Kernel, stage: str, error: BaseException | None) -> None:
        key = kernel_key(kernel, self.root)
        record = self.by_key.get(key)
        if record is None:
            record = self.by_key[key] = KernelRun(key[1], key[0])
            self.run.kernels.append(record)
        if stage == "trace":
            record.calls += 1
            if record not in self.recent:
                self.recent.append(record)
        if error is None:
            record.stages.setdefault(stage, "yes")
        else:
            record.stages[stage] = "no"
            self.errors.append((record, error))

    def on_compare(self, function: str, passed: bool) -> None:
        """A comparison belongs to the kernels called since the previous comparison; with none
        called since, to the kernels the previous comparison belonged to (several checks of one
        result); before any kernel call, to none."""
        self.run.comparisons += 1
        targets = self.recent or self.last
        self.recent, self.last = [], targets
        if not targets:
            self.run.unattributed += 1
        for record in targets:
            record.comparisons += 1
            if not passed:
                record.failed.append(function)

    def finish(self) -> None:
        """Describes each kernel's first error, now that its traceback reaches the caller's
        line (while the observer sees it, it ends in the frontend)."""
        for record, error in reversed(self.errors):
            record.error = describe(error, self.root, self.base)

    def raised_by(self, error: BaseException) -> str:
        """The kernel whose call raised ``error`` (or what it was raised from), else ``""``."""
        seen: BaseException | None = error
        while seen is not None:
            for record, e in self.errors:
                if seen is e:
                    return record.kernel
            seen = seen.__cause__ or seen.__context__
        return ""


def _namespace_of(error: BaseException, path: Path) -> dict[str, Any]:
    """The globals of ``path``'s module-level frame in ``error``'s traceback (a driver that
    raised still defined what came before the line)."""
    tb = error.__traceback__
    while tb is not None:
        frame = tb.tb_frame
        if frame.f_code.co_name == "<module>" and Path(frame.f_code.co_filename).resolve() == path:
            return frame.f_globals
        tb = tb.tb_next
    return {}


def _error_files(error: BaseException, root: Path) -> list[str]:
    files = []
    tb = error.__traceback__
    while tb is not None:
        code = tb.tb_frame.f_code
        if code.co_name == "<module>" and Path(code.co_filename).resolve().is_relative_to(root):
            files.append(relative(code.co_filename, root))
        tb = tb.tb_next
    return list(dict.fromkeys(files))


def _load_module(path: Path) -> dict[str, Any]:
    """Imports ``path`` as the module named after its stem (so siblings' ``import stem`` find
    it), unless a sibling already imported it; a file inside a package is imported by its
    dotted name, so its relative imports resolve."""
    dotted, _ = _sandbox.package_module(path)
    if dotted is not None:
        return importlib.import_module(dotted).__dict__
    name = path.stem
    existing = sys.modules.get(name)
    if existing is not None and getattr(existing, "__file__", None) == str(path):
        return existing.__dict__
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot load {path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        if sys.modules.get(name) is module:
            del sys.modules[name]
        raise
    return module.__dict__


def _kernels_in(namespaces: list[dict[str, Any]], root: Path) -> list[tuple[str, str]]:
    keys: dict[tuple[str, str], None] = {}
    for namespace in namespaces:
        for value in list(namespace.values()):
            if isinstance(value, nki.Kernel):
                keys[kernel_key(value, root)] = None
    return list(keys)


def run_file(path: Path, root: Path, role: str) -> FileRun:
    """Runs ``path`` (``role`` ``"driver"``: as ``__main__``; ``"module"``: imported) in its
    :func:`_sandbox.file_context` with kernel stages and comparisons recorded and its output
    captured. The frontend must already be ``import nki`` (:func:`torch_nki.nki.as_nki`);
    never raises for what the file does (``KeyboardInterrupt`` excepted)."""
    path = path.resolve()
    run = FileRun(relative(path, root), role)
    recorder = _Recorder(run, root)
    namespace: dict[str, Any] = {}
    start = time.perf_counter()
    with (
        _sandbox.captured_output() as output,
        _sandbox.file_context(path),
        _sandbox.torch_xla_shim() as shim,
        nki.observe(recorder.on_stage),
        _sandbox.recorded_comparisons(recorder.on_compare),
    ):
        run.torch_xla_shim = shim
        try:
            dotted, _ = _sandbox.package_module(path)
            if role == "driver" and dotted is not None:
                namespace = runpy.run_module(dotted, run_name="__main__", alter_sys=True)
            elif role == "driver":
                namespace = runpy.run_path(str(path), run_name="__main__")
            else:
                namespace = _load_module(path)
            run.completed = True
        except SystemExit as e:
            run.completed = e.code in (None, 0)
            if not run.completed:
                run.error = f"SystemExit: {e.code}"
        except Exception as e:
            namespace = _namespace_of(e, path)
            run.error = describe(e, root, path.parent)
            run.missing = e.name or "" if isinstance(e, ModuleNotFoundError) else ""
            run.stopped_by = recorder.raised_by(e)
            run.error_files = _error_files(e, root)
        modules = [
            m.__dict__
            for m in list(sys.modules.values())
            if isinstance(m, types.ModuleType) and _inside_root(m, root)
        ]
        run.seen = _kernels_in([namespace, *modules], root)
        recorder.finish()
    run.seconds = time.perf_counter() - start
    run.output = output.getvalue()
    return run


def _inside_root(module: types.ModuleType, root: Path) -> bool:
    file = getattr(module, "__file__", None)
    return isinstance(file, str) and Path(file).resolve().is_relative_to(root)

"""The pytest plugin ``torch-nki nkilib-suite`` loads (``-p torch_nki.nkilib_suite.plugin``)
into nki-library's test run. It changes none of nki-library's files; it supplies what the
published tree lacks and fixes one bug of it, each documented in docs/nki-library.md:

- ``test/utils/scripts/remote_lock_scripts.py`` and ``test/utils/perf_analysis_private.py`` are
  imported by the framework but not published (they lock remote hardware hosts and analyse
  device profiles): stand-ins with the names it imports, which fail if a test ever reaches them
  (only hardware runs do);
- ``Orchestrator._compiled_kernel`` is set only when a kernel is compiled, but read after every
  run, so simulation mode fails every test with an ``AttributeError`` at d2ad3a5: it defaults
  to ``None``;
- ``TORCH_NKI_NKILIB_EVERY=N`` keeps every N-th collected test (a deterministic sample, for a
  quick measurement) and deselects the rest;
- ``TORCH_NKI_NKILIB_MEMORY_GIB=G`` lets each pytest process (the controller and every xdist
  worker) map at most ``G`` GiB beyond what it maps when the plugin is configured (torch's
  libraries alone reserve some 3 GiB of address space they never touch), so a test that would
  exhaust the machine fails with ``MemoryError``."""

from __future__ import annotations

import enum
import os
import resource
import sys
import types
from typing import Any

_PREFIX = "test.utils"


class LockStatus(enum.Enum):
    """The remote host lock states the framework's lock client names."""

    ALLOCATED = 0
    DRAINED = 1
    DRAINING = 2
    NO_CORES = 3
    ERROR = 4
    RELEASED = 5
    UNDRAINED = 6
    FLOCK_TIMEOUT = 7

    @property
    def exit_code(self) -> int:
        return 64 + self.value

    @classmethod
    def from_exit_code(cls, code: int) -> LockStatus:
        return cls(code - 64)


class LockResult:
    """A remote lock result; there are no remote hosts in simulation."""

    @classmethod
    def from_json(cls, text: str) -> LockResult:
        raise RuntimeError("torch-nki's nki-library shim: remote hardware hosts are not available")


def _analyze_trace(**kwargs: Any) -> None:
    raise RuntimeError("torch-nki's nki-library shim: device profile analysis needs a device")


def _install_stand_ins() -> None:
    scripts = types.ModuleType(f"{_PREFIX}.scripts")
    scripts.__path__ = []
    locks = types.ModuleType(f"{_PREFIX}.scripts.remote_lock_scripts")
    locks.LockStatus = LockStatus  # type: ignore[attr-defined]
    locks.LockResult = LockResult  # type: ignore[attr-defined]
    perf = types.ModuleType(f"{_PREFIX}.perf_analysis_private")
    perf.analyze_trace = _analyze_trace  # type: ignore[attr-defined]
    for module in (scripts, locks, perf):
        sys.modules.setdefault(module.__name__, module)


_install_stand_ins()


def mapped_bytes() -> int:
    """The address space this process maps now (``VmSize``), in bytes."""
    with open("/proc/self/statm", encoding="ascii") as statm:
        return int(statm.read().split()[0]) * resource.getpagesize()


def limit_memory(budget_gib: float) -> int:
    """Caps this process's address space at what it maps now plus ``budget_gib`` GiB and returns
    the cap. Only the soft limit moves, so a worker this process starts (which inherits it) can
    set its own cap from its own start."""
    cap = mapped_bytes() + int(budget_gib * 2**30)
    _, hard = resource.getrlimit(resource.RLIMIT_AS)
    if hard != resource.RLIM_INFINITY:
        cap = min(cap, hard)
    resource.setrlimit(resource.RLIMIT_AS, (cap, hard))
    return cap


def pytest_configure(config: Any) -> None:
    budget = os.environ.get("TORCH_NKI_NKILIB_MEMORY_GIB")
    if budget:
        limit_memory(float(budget))


def pytest_sessionstart(session: Any) -> None:
    orchestrator = sys.modules.get(f"{_PREFIX}.test_orchestrator")
    if orchestrator is not None and not hasattr(orchestrator.Orchestrator, "_compiled_kernel"):
        orchestrator.Orchestrator._compiled_kernel = None


def pytest_collection_modifyitems(config: Any, items: list[Any]) -> None:
    every = int(os.environ.get("TORCH_NKI_NKILIB_EVERY", "1") or 1)
    if every <= 1:
        return
    kept = [item for i, item in enumerate(items) if i % every == 0]
    config.hook.pytest_deselected(items=[item for i, item in enumerate(items) if i % every])
    items[:] = kept

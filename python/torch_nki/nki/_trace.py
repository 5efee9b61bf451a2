"""The trace in progress: one native ``Tracer`` per kernel call, and the kernel source line of
each frontend call (the first frame outside ``torch_nki.nki``)."""

from __future__ import annotations

import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType
from typing import Any

from torch_nki import _native

_PACKAGE = __name__.rpartition(".")[0]


def location(depth: int = 1) -> tuple[str, int]:
    """``(file, line)`` of the kernel code that called into the frontend."""
    frame: FrameType | None = sys._getframe(depth)
    while frame is not None and str(frame.f_globals.get("__name__", "")).startswith(_PACKAGE):
        frame = frame.f_back
    if frame is None:
        return ("<unknown>", 0)
    return (frame.f_code.co_filename, frame.f_lineno)


def where() -> str:
    """``file:line`` of the calling kernel code, for messages."""
    file, line = location(2)
    return f"{file}:{line}"


class Trace:
    """One kernel being traced: the native recorder plus what the Python side tracks."""

    def __init__(self, name: str, target: str, inputs: list[tuple[str, list[int], str]]) -> None:
        self.name = name
        self.target = target
        self.native: Any = _native.Tracer(name, target, inputs)
        self.active = True
        self.reinterpreting = False
        """Whether the kernel made a dtype view (``_reinterpret``): only then do instructions
        look for views to keep in step."""
        self.outputs: list[Any] = []
        """Outputs allocated so far, in order."""
        self.scratch: list[Any] = []
        """``nl.private_hbm`` tensors allocated so far, in order."""
        self.prints: list[tuple[str, Any]] = []
        """``nl.device_print`` calls so far: their prefixes and the extra outputs they copy to."""
        self.written_inputs: list[Any] = []
        """Kernel arguments the kernel wrote, in the order of their first write (each now an
        output; see ``torch_nki.nki._inplace``)."""
        self.grid: tuple[int, ...] = ()
        """The launch grid (``()`` without one; see ``torch_nki.nki._grid``)."""
        self.program_id: list[int] = []
        """The id of the instance being traced, per grid axis."""
        self.scopes: list[Any] = []
        """The loop scopes open, innermost last (``torch_nki.nki._registers`` reads them)."""
        self.loop_invocations = 0
        """Loops opened so far (each ``nl.*_range`` call once, however many iterations): the
        native recorder tells apart back-to-back loops at one line by it."""

    def at(self) -> tuple[str, int]:
        return location(2)


_STATE = threading.local()

NO_REORDER = "no_reorder"
"""The scope an open ``nl.no_reorder()`` block pushes onto :attr:`Trace.scopes`."""


def active() -> Trace | None:
    """The trace running on this thread, if any."""
    trace: Trace | None = getattr(_STATE, "trace", None)
    return trace


def current() -> Trace:
    """The trace running on this thread; ``RuntimeError`` outside a kernel call."""
    trace: Trace | None = getattr(_STATE, "trace", None)
    if trace is None:
        file, line = location(2)
        raise RuntimeError(
            f"torch_nki.nki: NKI calls only work inside a kernel being traced "
            f"(call the @nki.jit function, or nki.simulate(kernel)(...)) ({file}:{line})"
        )
    return trace


@contextmanager
def tracing(trace: Trace) -> Iterator[Trace]:
    """Makes ``trace`` current for the body."""
    if getattr(_STATE, "trace", None) is not None:
        raise RuntimeError(
            f"torch_nki.nki: kernel {trace.name} called while another kernel is being traced; "
            "NKI kernels do not call other kernels"
        )
    _STATE.trace = trace
    try:
        yield trace
    finally:
        trace.active = False
        _STATE.trace = None


def unsupported(name: str, detail: str = "") -> NotImplementedError:
    """The error for an NKI API the frontend does not implement, naming it and the line."""
    file, line = location(2)
    extra = f": {detail}" if detail else ""
    return NotImplementedError(
        f"torch_nki.nki does not implement {name}{extra} ({file}:{line}); "
        "see docs/nki-frontend.md for what is supported"
    )

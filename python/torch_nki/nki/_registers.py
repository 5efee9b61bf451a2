"""Registers and device loops: ``nki.isa.VirtualRegister`` (what ``nisa.register_alloc``
returns), and the loops the device runs with them — ``nl.dynamic_range``, ``nl.fori_loop``,
``nl.while_loop`` and ``while reg:``.

A device loop is traced once, as NKI compiles it: its body is one copy, and the simulator runs
it as often as the registers say when the kernel runs. A counted loop gives its body the index as
a ``VirtualRegister`` (not a Python int: it is only known on the device), which the kernel can
store with ``nisa.register_store`` or move into another register.

``while reg:`` works as NKI's parser frontend reads it: the first test of the register opens a
device ``while`` loop and is true, the body is traced once, and the test at the same ``while``
line closes the loop and is false. Any other truth test of a register (``if reg:``) is a
``TypeError``, as is ``int(reg)``: its value does not exist while tracing.
"""

from __future__ import annotations

import linecache
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from types import CodeType
from typing import Any

from torch_nki.nki._trace import NO_REORDER, Trace, current, location, where


class VirtualRegister:
    """A register of the kernel being traced: a runtime int32 scalar (``nki.isa.VirtualRegister``)."""

    def __init__(self, trace: Trace, reg_id: int) -> None:
        self.trace = trace
        self.id = reg_id

    def operand(self) -> tuple[str, int]:
        """The native encoding, ``("reg", id)``."""
        if self.trace is not current():
            raise ValueError(
                f"torch_nki.nki: register r{self.id} belongs to another kernel call; allocate "
                f"registers in the call that uses them ({where()})"
            )
        return ("reg", self.id)

    def __repr__(self) -> str:
        return f"VirtualRegister(r{self.id})"

    def __bool__(self) -> bool:
        return _truth(self, sys._getframe(1))

    def _no_value(self, what: str) -> TypeError:
        return TypeError(
            f"{what} of VirtualRegister r{self.id}: a register's value exists only on the device, "
            f"not while the kernel is traced ({where()})"
        )

    def __int__(self) -> int:
        raise self._no_value("int()")

    def __index__(self) -> int:
        raise self._no_value("index")

    def __float__(self) -> float:
        raise self._no_value("float()")


@dataclass
class _While:
    """An open ``while reg:`` loop: its register and the statement that tests it."""

    reg: int
    code: CodeType
    line: int
    file: str


def _truth(reg: VirtualRegister, frame: Any) -> bool:
    trace = current()
    top = trace.scopes[-1] if trace.scopes else None
    code, line = frame.f_code, frame.f_lineno
    if isinstance(top, _While) and top.reg == reg.id and top.code is code and top.line == line:
        trace.scopes.pop()
        trace.native.close_loop()
        return False
    text = linecache.getline(code.co_filename, line).strip()
    if text and not text.startswith("while"):
        raise TypeError(
            f"VirtualRegister r{reg.id} has no truth value while tracing: its value exists only on "
            f"the device; `while reg:` is a device loop, other tests (`if reg:`) are not supported "
            f"({code.co_filename}:{line})"
        )
    if NO_REORDER in trace.scopes:
        raise TypeError(
            f"`while` on a register inside nl.no_reorder() is not supported (NKI refuses it "
            f"too); put the no_reorder block inside the loop body ({code.co_filename}:{line})"
        )
    trace.native.open_device_loop("while", reg.operand(), None, 1, code.co_filename, line)
    trace.scopes.append(_While(reg.id, code, line, code.co_filename))
    return True


def check_closed(trace: Trace) -> None:
    """Raises when a ``while reg:`` loop was left without testing its register again (a
    ``break`` or ``return`` inside it)."""
    for scope in trace.scopes:
        if isinstance(scope, _While):
            raise TypeError(
                f"the `while` loop on register r{scope.reg} at {scope.file}:{scope.line} ended "
                "without testing its register again (a break or return inside a device while "
                "loop is not supported)"
            )


def _open(trace: Trace, kind: str, start: Any, stop: Any, step: int, call: str) -> Any:
    """Opens a device loop at the kernel line; refused inside ``nl.no_reorder()``, as NKI does."""
    file, line = location(2)
    if NO_REORDER in trace.scopes:
        raise TypeError(
            f"{call} inside nl.no_reorder() is not supported (NKI refuses it too); put the "
            f"no_reorder block inside the loop body ({file}:{line})"
        )
    return trace.native.open_device_loop(kind, start, stop, step, file, line)


def _bound(value: Any, what: str) -> Any:
    if isinstance(value, VirtualRegister):
        return value.operand()
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{what} must be an int or a VirtualRegister, got {value!r} ({where()})")
    return value


def _step(value: Any, call: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise TypeError(
            f"{call}: step must be a compile-time positive int (not a VirtualRegister), "
            f"got {value!r} ({where()})"
        )
    return value


def dynamic_range(start: Any, stop: Any = None, step: int = 1) -> Iterator[VirtualRegister]:
    """``nl.dynamic_range(start, stop, step)``: a loop the device runs, its bounds ints or
    registers (read when it starts), ``step`` a positive int. The body is traced once with the
    index register."""
    if stop is None:
        start, stop = 0, start
    trace = current()
    bounds = (_bound(start, "start"), _bound(stop, "stop"), _step(step, "nl.dynamic_range"))
    index = _open(trace, "range", *bounds, "nl.dynamic_range")
    return _device_scope(trace, index)


def _device_scope(trace: Trace, index: int) -> Iterator[VirtualRegister]:
    trace.scopes.append("device")
    try:
        yield VirtualRegister(trace, index)
    finally:
        if trace.active:
            trace.scopes.pop()
            trace.native.close_loop()


def fori_loop(lower: Any, upper: Any, body_fun: Callable[[VirtualRegister], Any], step: int = 1) -> None:
    """``nl.fori_loop``: ``body_fun(i)`` on the device for ``i`` from ``lower`` to ``upper`` by
    ``step``, ``i`` the index register (traced once)."""
    trace = current()
    bounds = (_bound(lower, "lower"), _bound(upper, "upper"), _step(step, "nl.fori_loop"))
    index = _open(trace, "range", *bounds, "nl.fori_loop")
    for i in _device_scope(trace, index):
        body_fun(i)


def while_loop(init: Any, body_fun: Callable[[VirtualRegister], Any]) -> None:
    """``nl.while_loop``: ``r = body_fun(r)`` on the device while ``r`` is nonzero, from the
    register ``init`` (traced once). A body returning another register moves its value into
    the condition register at the end of each iteration."""
    if not isinstance(init, VirtualRegister):
        raise TypeError(f"nl.while_loop: init must be a VirtualRegister, got {init!r} ({where()})")
    trace = current()
    file, line = location()
    _open(trace, "while", init.operand(), None, 1, "nl.while_loop")
    trace.scopes.append("device")
    try:
        result = body_fun(init)
        if result is not init:
            if not isinstance(result, VirtualRegister):
                raise TypeError(
                    f"nl.while_loop: the body must return the next condition register, got "
                    f"{result!r} ({file}:{line})"
                )
            from torch_nki.nki import isa

            isa.instruction("register_move")(dst=init, src=result)
    finally:
        if trace.active:
            trace.scopes.pop()
            trace.native.close_loop()

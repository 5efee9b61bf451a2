"""The SPMD launch grid: ``kernel[2](...)``, ``kernel[2, 3](...)``, and inside the kernel
``nl.program_id``, ``nl.num_programs`` and ``nl.program_ndim``.

A kernel launched on a grid is traced once per program instance, in program-id order
(row-major over the axes), with its ids as plain Python ints: they work in Python control flow,
in index arithmetic and as loop bounds, as in NKI. Each instance is a one-iteration grid scope
of the trace (its tiles are its own: SBUF and PSUM per instance); the ``nl.shared_hbm`` tensors
every instance allocates are one set, shared (each instance must allocate the same ones and
return them). A call without a grid is one program: ``program_id(0) == 0``,
``num_programs() == 1``, ``program_ndim() == 0`` (the docs: 0 if no grid).
"""

from __future__ import annotations

import itertools
import numbers
from collections.abc import Callable, Sequence
from typing import Any

from torch_nki.nki._trace import Trace, current, where

MAX_GRID_AXES = 4
"""The most axes a launch grid may have (torch-nki's limit: the NKI docs state none; their
examples use one and two)."""


def grid_text(grid: Sequence[int]) -> str:
    """The grid as Python writes the tuple: ``(2,)``, ``(2, 3)``, ``()``."""
    return repr(tuple(grid))


def normalize_grid(kernel: str, grid: Any) -> tuple[int, ...]:
    """``kernel[grid]``'s grid as a tuple of positive ints; a clear error for anything else."""
    items = grid if isinstance(grid, tuple) else (grid,)
    if not items:
        raise ValueError(f"{kernel}[()]: a launch grid needs at least one axis (e.g. {kernel}[2])")
    if len(items) > MAX_GRID_AXES:
        raise ValueError(
            f"{kernel}[{', '.join(map(repr, items))}]: a launch grid has at most {MAX_GRID_AXES} "
            f"axes, got {len(items)}"
        )
    for axis, n in enumerate(items):
        if isinstance(n, bool) or not isinstance(n, numbers.Integral):
            raise TypeError(
                f"{kernel}[...]: launch grid axis {axis} must be an int, got {n!r} ({type(n).__name__})"
            )
        if n < 1:
            raise ValueError(
                f"{kernel}[...]: launch grid axis {axis} has {n} programs; every axis needs at least 1"
            )
    return tuple(int(n) for n in items)


def trace_instances(
    trace: Trace, grid: tuple[int, ...], location: tuple[str, int], body: Callable[[], Any]
) -> Any:
    """Runs ``body`` (the kernel on its arguments) once per instance of ``grid``, in program-id
    order, each inside its grid scopes; returns the first instance's result after checking every
    instance returned the same outputs."""
    file, line = location
    trace.grid = grid
    trace.program_id = [0] * len(grid)
    trace.native.set_grid(list(grid), file, line)
    opened: list[int] = []
    first: Any = None
    first_ids: list[Any] | None = None
    for ids in itertools.product(*(range(n) for n in grid)):
        # Close the scopes of the axes whose id changes, then open the new ones.
        same = 0
        while same < len(opened) and opened[same] == ids[same]:
            same += 1
        for _ in range(len(opened) - same):
            trace.native.close_loop()
        del opened[same:]
        for axis in range(same, len(grid)):
            trace.native.open_grid_axis(axis, ids[axis], file, line)
            opened.append(ids[axis])
        trace.program_id = list(ids)
        trace.outputs = []
        result = body()
        outputs = result if isinstance(result, tuple | list) else (result,)
        out_ids = [_returned_key(o) for o in outputs]
        if first_ids is None:
            first, first_ids = result, out_ids
        elif out_ids != first_ids:
            raise TypeError(
                f"torch_nki.nki: kernel {trace.name} instance {ids} of the launch grid "
                f"{grid_text(grid)} returned other outputs than instance {(0,) * len(grid)}; every "
                "instance must return the same nl.shared_hbm tensors"
            )
    for _ in opened:
        trace.native.close_loop()
    return first


def _returned_key(value: Any) -> Any:
    """What an instance returned, comparable across instances: an argument by its position
    (its id changes when an instance first writes it: copy-on-write), an allocated tensor by
    its id (every instance's ``nl.ndarray`` of one output gives the same id), a view by its
    tensor's key and its walk."""
    from torch_nki.nki._values import HbmTensor, HbmView

    if isinstance(value, HbmTensor):
        return ("argument", value.argument) if value.argument is not None else ("tensor", value.id)
    if isinstance(value, HbmView):
        return (_returned_key(value.tensor), value.offset, tuple(value.dims))
    return ("other", getattr(value, "id", None))


def _axis(function: str, axis: Any, trace: Trace) -> int:
    """``axis`` checked against the trace's grid (axis 0 of a call without one is allowed)."""
    if isinstance(axis, bool) or not isinstance(axis, numbers.Integral):
        raise TypeError(f"{function}: axis must be an int, got {axis!r} ({where()})")
    axes = max(len(trace.grid), 1)
    if not 0 <= int(axis) < axes:
        raise ValueError(
            f"{function}: axis {axis} is outside the launch grid {grid_text(trace.grid)} of kernel "
            f"{trace.name} (axes 0..{axes - 1}) ({where()})"
        )
    return int(axis)


def program_id(axis: int = 0) -> int:
    """``nl.program_id(axis)``: this instance's index along ``axis`` of the launch grid (0
    without a grid), a Python int."""
    trace = current()
    axis = _axis("nl.program_id", axis, trace)
    return trace.program_id[axis] if trace.grid else 0


def num_programs(axes: int | Sequence[int] | None = 0) -> int:
    """``nl.num_programs(axes)``: how many programs the launch grid has along ``axes`` (an axis
    or a tuple of them: the product; ``None``, NKI's older default, the whole grid). 1 without
    a grid."""
    trace = current()
    if axes is None:
        axes = tuple(range(len(trace.grid)))
    chosen = (axes,) if not isinstance(axes, tuple | list) else tuple(axes)
    n = 1
    for axis in chosen:
        a = _axis("nl.num_programs", axis, trace)
        n *= trace.grid[a] if trace.grid else 1
    return n


def program_ndim() -> int:
    """``nl.program_ndim()``: how many axes the launch grid has (0 without one)."""
    return len(current().grid)

"""SPMD launch grids in the NKI frontend: ``kernel[2](...)``, ``kernel[2, 3](...)``,
``kernel[(2,)](...)`` with ``nl.program_id`` / ``nl.num_programs`` / ``nl.program_ndim``. Each
instance writes its slice of a shared output (checked against NumPy), the id works in Python
control flow, loop bounds and slicing, grid mistakes are clear errors, and the generated source
of a gridded program traces back to the same program, for the frontend's own traces and for the
Rust kernel held in ``tests/tests/snapshots/codegen__grid_blocks*.snap``."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import torch_nki.nki.isa as nisa
import torch_nki.nki.language as nl
from torch_nki import nki
from torch_nki.errors import TraceError

SNAPSHOTS = Path(__file__).resolve().parents[1] / "tests" / "snapshots"


def _rand(*shape: int, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


@nki.jit
def scale_share(x: Any) -> Any:
    """Instance ``p`` of ``G`` scales its share of the rows by ``p + 1`` (the last share is
    ragged): ``program_id`` in slicing, in a loop bound and as a Python number."""
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    rows = x.shape[0]
    share = (rows + nl.num_programs() - 1) // nl.num_programs()
    pid = nl.program_id(0)
    first = pid * share
    mine = min(share, rows - first)
    tiles = (mine + nl.tile_size.pmax - 1) // nl.tile_size.pmax
    for i in nl.affine_range(tiles):
        start = first + i * nl.tile_size.pmax
        n = min(nl.tile_size.pmax, first + mine - start)
        t = nl.load(x[start : start + n, :])
        nisa.tensor_scalar(dst=t, data=t, op0=nl.multiply, operand0=float(pid + 1))
        nl.store(out[start : start + n, :], value=t)
    return out


@pytest.mark.parametrize("grid", [1, 2, 3, (2,), (4,)])
def test_each_instance_of_a_1d_grid_writes_its_slice(grid: Any) -> None:
    x = _rand(300, 16)
    g = grid[0] if isinstance(grid, tuple) else grid
    share = (300 + g - 1) // g
    want = x * (np.arange(300) // share + 1)[:, None].astype(np.float32)
    np.testing.assert_array_equal(scale_share[grid](x), want)


def test_an_unlaunched_call_is_one_program() -> None:
    x = _rand(300, 16)
    np.testing.assert_array_equal(scale_share(x), x)
    np.testing.assert_array_equal(nki.simulate(scale_share[2])(x), scale_share[2](x))
    assert nki.trace(scale_share[2], x).grid == [2]
    assert nki.trace(scale_share, x).grid == []
    assert repr(scale_share[2, 1]) == "<nki kernel scale_share launched on (2, 1)>"


@nki.jit
def block_copy(a: Any) -> Any:
    """The NKI docs' SPMD example: instance ``(i, j)`` copies ``a[i, j]``."""
    b = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    i = nl.program_id(0)
    j = nl.program_id(1)
    t = nl.load(a[i, j])
    nl.store(b[i, j], value=t)
    return b


def test_a_2d_grid_runs_every_instance() -> None:
    src = _rand(4, 2, 1, 1)
    np.testing.assert_array_equal(block_copy[4, 2](src), src)
    a = _rand(2, 3, 8, 5, seed=1)
    np.testing.assert_array_equal(block_copy[2, 3](a), a)
    program = block_copy[2, 3].trace(a)
    assert program.grid == [2, 3]
    assert program.instruction_count() == 6 * 2


@nki.jit
def grid_facts(x: Any) -> Any:
    """Writes ``[program_ndim, num_programs(0), num_programs((0, 1)) or -1, num_programs(None)]``
    from the instance with every id 0, and the running order from every instance."""
    out = nl.ndarray((1, 4), dtype=nl.float32, buffer=nl.shared_hbm)
    # One element per instance: every output element is written (output coverage).
    order = nl.ndarray((1, nl.num_programs(None)), dtype=nl.float32, buffer=nl.shared_hbm)
    ndim = nl.program_ndim()
    ids = [nl.program_id(a) for a in range(max(ndim, 1))]
    linear = 0
    for a in range(ndim):
        linear = linear * nl.num_programs(a) + ids[a]
    if all(i == 0 for i in ids):
        both = nl.num_programs((0, 1)) if ndim == 2 else -1
        facts = [ndim, nl.num_programs(0), both, nl.num_programs(None)]
        for k, v in enumerate(facts):
            t = nl.full((1, 1), float(v), dtype=nl.float32)
            nl.store(out[0:1, k : k + 1], value=t)
    t = nl.full((1, 1), float(linear), dtype=nl.float32)
    nl.store(order[0:1, linear : linear + 1], value=t)
    return out, order


def test_num_programs_and_program_ndim() -> None:
    x = _rand(2, 2)
    facts, _ = grid_facts(x)
    np.testing.assert_array_equal(facts, [[0, 1, -1, 1]])
    facts, order = grid_facts[3](x)
    np.testing.assert_array_equal(facts, [[1, 3, -1, 3]])
    np.testing.assert_array_equal(order[0, :3], [0, 1, 2])
    facts, order = grid_facts[2, 4](x)
    np.testing.assert_array_equal(facts, [[2, 2, 8, 8]])
    np.testing.assert_array_equal(order[0], np.arange(8))


@nki.jit
def first_only(x: Any) -> Any:
    """Only instance 0 writes (Python control flow on the id)."""
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    if nl.program_id(0) == 0:
        nl.store(out, value=nl.load(x))
    return out


def test_the_program_id_works_in_python_control_flow() -> None:
    x = _rand(8, 8)
    program = first_only[2].trace(x)
    assert program.instruction_count() == 2
    np.testing.assert_array_equal(first_only[2](x), x)


@pytest.mark.parametrize(
    ("grid", "error", "message"),
    [
        (0, ValueError, "launch grid axis 0 has 0 programs"),
        (-2, ValueError, "launch grid axis 0 has -2 programs"),
        ((2, 0), ValueError, "launch grid axis 1 has 0 programs"),
        (2.0, TypeError, "launch grid axis 0 must be an int, got 2.0"),
        (True, TypeError, "launch grid axis 0 must be an int, got True"),
        ("2", TypeError, "launch grid axis 0 must be an int, got '2'"),
        ((), ValueError, "a launch grid needs at least one axis"),
        ((1, 1, 1, 1, 1), ValueError, "a launch grid has at most 4 axes, got 5"),
    ],
)
def test_bad_grids_are_clear_errors(grid: Any, error: type[Exception], message: str) -> None:
    with pytest.raises(error, match=re.escape(message)):
        scale_share[grid]
    assert nki.MAX_GRID_AXES == 4


@nki.jit
def reads_axis(x: Any, axis: int, fn: str) -> Any:
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    getattr(nl, fn)(axis)
    nl.store(out, value=nl.load(x))
    return out


@pytest.mark.parametrize("fn", ["program_id", "num_programs"])
def test_an_axis_outside_the_grid_names_the_axis_and_the_grid(fn: str) -> None:
    x = _rand(4, 4)
    with pytest.raises(ValueError, match=re.escape(f"nl.{fn}: axis 1 is outside the launch grid (2,)")):
        reads_axis[2](x, 1, fn)
    with pytest.raises(ValueError, match=re.escape(f"nl.{fn}: axis 2 is outside the launch grid (2, 2)")):
        reads_axis[2, 2](x, 2, fn)
    with pytest.raises(ValueError, match=re.escape(f"nl.{fn}: axis 1 is outside the launch grid ()")):
        reads_axis(x, 1, fn)
    with pytest.raises(TypeError, match="axis must be an int"):
        reads_axis[2](x, "0", fn)
    # Axis 0 without a grid is the one program.
    np.testing.assert_array_equal(reads_axis(x, 0, fn), x)


@nki.jit
def shape_by_instance(x: Any) -> Any:
    out = nl.ndarray((4 + nl.program_id(0), 4), dtype=x.dtype, buffer=nl.shared_hbm)
    return out


@nki.jit
def returns_other(x: Any) -> Any:
    a = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    b = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    for o in (a, b):
        nl.store(o, value=nl.load(x))
    return a if nl.program_id(0) == 0 else b


def test_every_instance_shares_one_set_of_outputs() -> None:
    x = _rand(4, 4)
    with pytest.raises(TraceError, match=r"program instance 1 allocates shared_hbm tensor #0 as \[5, 4\]"):
        shape_by_instance[2](x)
    with pytest.raises(TypeError, match=r"instance \(1,\) of the launch grid \(2,\) returned other outputs"):
        returns_other[2](x)


def test_device_print_in_a_grid_is_not_implemented_yet() -> None:
    @nki.jit
    def prints(x: Any) -> Any:
        out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
        t = nl.load(x)
        nl.device_print("t", t)
        nl.store(out, value=t)
        return out

    with pytest.raises(NotImplementedError, match=r"nl\.device_print in a kernel launched on a grid"):
        prints[2](_rand(4, 4))


def test_the_cost_model_spreads_instances_over_the_two_cores_of_trn2() -> None:
    x = _rand(1024, 256)
    text, summary, _ = scale_share[2].trace(x).cost()
    assert "launch grid over 2 physical cores" in text
    assert len(json.loads(summary)["core_ns"]) == 2
    text, summary, _ = scale_share[2].trace(x, target="trn1").cost()
    assert "core_ns" not in json.loads(summary)


def _strip(source: str) -> str:
    """Source without location comments (the only thing that differs between traces)."""
    return "\n".join(line.split("  # ")[0].rstrip() for line in source.splitlines())


@pytest.mark.parametrize("grid", [(3,), (2, 3)])
def test_the_generated_source_of_a_grid_traces_back_to_the_same_program(grid: tuple[int, ...]) -> None:
    x = _rand(2, 3, 8, 5) if len(grid) == 2 else _rand(300, 16)
    kernel = block_copy if len(grid) == 2 else scale_share
    first = kernel[grid].trace(x)
    source = first.emit()
    assert f"LAUNCH_GRID = {grid!r}" in source
    module = nki.load_source(source, "grid_roundtrip")
    again = getattr(module, kernel.__name__)[module.LAUNCH_GRID]
    second = again.trace(x)
    assert first.difference(second) is None
    assert _strip(second.emit()) == _strip(source)
    np.testing.assert_array_equal(again(x), kernel[grid](x))


def _snapshot(name: str) -> str:
    text = (SNAPSHOTS / f"codegen__{name}.snap").read_text()
    return text.split("---\n", 2)[2]


def test_the_rust_grid_kernel_source_traces_to_its_unrolled_program() -> None:
    """The Rust kernel of ``tests/tests/codegen.rs`` (symbolic ``program_id``) emits source that
    the frontend traces, instance by instance, to what the Rust program emits unrolled: the same
    instructions with the same operands, scope by scope."""
    source = _snapshot("grid_blocks")
    unrolled = _snapshot("grid_blocks_unrolled")
    module = nki.load_source(source, "grid_blocks")
    assert module.LAUNCH_GRID == (2, 3)
    kernel = module.grid_blocks[module.LAUNCH_GRID]
    x = _rand(24, 5)
    traced = kernel.trace(x)
    assert _strip(traced.emit()) == _strip(unrolled)
    np.testing.assert_array_equal(kernel(x), 2 * x)

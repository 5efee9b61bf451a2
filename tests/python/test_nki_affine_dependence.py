"""``affine-range-dependence`` in the NKI frontend: an ``nl.affine_range`` whose iterations
depend on each other is a ``ValidationError`` naming the rule, both lines and the loop; the
reductions the NKI docs allow pass; and ``Program.simulate(order=...)`` /
``Kernel.order_difference`` show an order dependence as different bits."""

from __future__ import annotations

import inspect
from typing import Any

import numpy as np
import pytest

import torch_nki.nki.isa as nisa
import torch_nki.nki.language as nl
from torch_nki import nki
from torch_nki.errors import ValidationError, ValidationWarning


def _rand(*shape: int, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).uniform(-1, 1, shape).astype(np.float32)


def _line_of(fn: Any, marker: str) -> str:
    fn = inspect.unwrap(fn)
    lines, start = inspect.getsourcelines(fn)
    offset = next(i for i, text in enumerate(lines) if marker in text)
    return f"{inspect.getsourcefile(fn)}:{start + offset}"


@nki.jit
def every_iteration_stores_row_zero(x):
    """Each iteration stores its block of ``x`` to the same output rows."""
    out = nl.ndarray((32, x.shape[1]), dtype=x.dtype, buffer=nl.shared_hbm)
    for i in nl.affine_range(x.shape[0] // 32):  # loop
        t = nl.load(x[i * 32 : (i + 1) * 32, :])
        nl.store(out[0:32, :], value=t)  # store
    return out


@nki.jit
def reads_what_the_next_iteration_writes(x):
    """Iteration ``i`` reads output rows that iteration ``i + 1`` writes."""
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    copy = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    n = x.shape[0] // 32
    for i in nl.affine_range(n):  # loop
        t = nl.load(x[i * 32 : (i + 1) * 32, :])
        nl.store(out[i * 32 : (i + 1) * 32, :], value=t)  # write
        j = min(i + 1, n - 1)
        u = nl.load(out[j * 32 : (j + 1) * 32, :])  # read
        nl.store(copy[i * 32 : (i + 1) * 32, :], value=u)
    return out, copy


@nki.jit
def sequential_is_fine(x):
    out = nl.ndarray((32, x.shape[1]), dtype=x.dtype, buffer=nl.shared_hbm)
    for i in nl.sequential_range(x.shape[0] // 32):
        t = nl.load(x[i * 32 : (i + 1) * 32, :])
        nl.store(out[0:32, :], value=t)
    return out


@nki.jit
def psum_accumulation(lhs_t, rhs):
    """The tutorial's pattern: the first ``nc_matmul`` overwrites, the next ones accumulate."""
    k, m = lhs_t.shape
    _, n = rhs.shape
    out = nl.ndarray((m, n), dtype=nl.float32, buffer=nl.shared_hbm)
    acc = nl.ndarray((m, n), dtype=nl.float32, buffer=nl.psum)
    for kk in nl.affine_range(k // 128):
        a = nl.load(lhs_t[kk * 128 : (kk + 1) * 128, :])
        b = nl.load(rhs[kk * 128 : (kk + 1) * 128, :])
        nisa.nc_matmul(dst=acc, stationary=a, moving=b)
    res = nl.ndarray((m, n), dtype=nl.float32, buffer=nl.sbuf)
    nisa.tensor_copy(dst=res, src=acc)
    nl.store(out, value=res)
    return out


@nki.jit
def disjoint_columns(x):
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    for j in nl.affine_range(x.shape[1] // 16):
        t = nl.load(x[:, j * 16 : (j + 1) * 16])
        nl.store(out[:, j * 16 : (j + 1) * 16], value=nl.multiply(t, 2.0))
    return out


@nki.jit
def rotating_buffers(x, stale):
    """nki-library's multi-buffering: iteration ``i`` loads into buffer ``i % 2`` and reads it
    back. With ``stale``, odd iterations read a column their own load did not write (the value
    another iteration left there)."""
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    bufs = [nl.ndarray((x.shape[0], 32), dtype=x.dtype, buffer=nl.sbuf) for _ in range(2)]
    for i in nl.affine_range(x.shape[1] // 32):  # loop
        buf = bufs[i % 2]
        width = 31 if stale and i % 2 else 32
        nisa.dma_copy(dst=buf[:, 0:width], src=x[:, i * 32 : i * 32 + width])  # load
        res = nl.ndarray((x.shape[0], 32), dtype=x.dtype, buffer=nl.sbuf)
        nisa.tensor_scalar(dst=res, data=buf, op0=nl.multiply, operand0=2.0)  # use
        nisa.dma_copy(dst=out[:, i * 32 : (i + 1) * 32], src=res)
    return out


def test_buffers_each_iteration_writes_before_reading_are_a_warning() -> None:
    x = _rand(128, 128)
    with pytest.warns(ValidationWarning, match="affine-range-dependence") as record:
        np.testing.assert_array_equal(rotating_buffers(x, False), x * 2)
    message = str(record[0].message)
    assert f"affine_range at {_line_of(rotating_buffers, '# loop')}" in message
    assert "iterations 0 and 2 both use" in message and "as scratch" in message
    assert _line_of(rotating_buffers, "# load") in message
    # A read of an element the iteration did not write itself sees another iteration's value.
    with pytest.raises(ValidationError, match="one iteration reads what another writes") as info:
        rotating_buffers(x, True)
    assert _line_of(rotating_buffers, "# use") in str(info.value)


def test_every_iteration_storing_one_row_is_an_error_naming_the_rule_and_lines() -> None:
    with pytest.raises(ValidationError) as info:
        every_iteration_stores_row_zero(_rand(128, 64))
    e = info.value
    assert e.rule == "affine-range-dependence"
    store = _line_of(every_iteration_stores_row_zero, "# store")
    assert e.location == store
    message = str(e)
    assert f"affine_range at {_line_of(every_iteration_stores_row_zero, '# loop')}" in message
    assert "two iterations write the same element" in message


def test_a_read_of_another_iterations_write_names_both_lines() -> None:
    with pytest.raises(ValidationError) as info:
        reads_what_the_next_iteration_writes(_rand(128, 64))
    message = str(info.value)
    fn = reads_what_the_next_iteration_writes
    for marker in ["# loop", "# write", "# read"]:
        assert _line_of(fn, marker) in message, (marker, message)


def test_allowed_patterns_pass() -> None:
    x = _rand(128, 64)
    np.testing.assert_array_equal(sequential_is_fine(x), x[96:128])
    lhs_t, rhs = _rand(384, 64), _rand(384, 256, seed=1)
    got = psum_accumulation(lhs_t, rhs)
    np.testing.assert_allclose(got, lhs_t.T.astype(np.float64) @ rhs, rtol=1e-5, atol=1e-5)
    np.testing.assert_array_equal(disjoint_columns(x), x * 2)


def test_orders_keep_independent_bits_and_show_a_dependence() -> None:
    x = _rand(128, 64)
    for order in [("program", "reversed"), ("program", "shuffled:7")]:
        assert disjoint_columns.order_difference(x, orders=order) is None
    # A racy kernel, traced without validation: the last iteration in the order wins.
    program = nki.trace(every_iteration_stores_row_zero, x)
    forward, backward = (program.simulate([x.tobytes()], order=o)[0] for o in ["program", "reversed"])
    np.testing.assert_array_equal(np.frombuffer(forward, np.float32).reshape(32, 64), x[96:128])
    np.testing.assert_array_equal(np.frombuffer(backward, np.float32).reshape(32, 64), x[0:32])
    with pytest.raises(ValueError, match="iteration order `sideways`"):
        program.simulate([x.tobytes()], order="sideways")


@nki.jit
def rewrites_in_a_python_for(x):
    """A plain ``for`` around an ``affine_range``: each pass rewrites the same rows, in order
    (the passes are not iterations of the affine_range)."""
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    for k in range(2):
        for i in nl.affine_range(x.shape[0] // 32):
            t = nl.load(x[i * 32 : (i + 1) * 32, :])
            nl.store(out[i * 32 : (i + 1) * 32, :], value=nl.multiply(t, float(k + 1)))
    return out


def test_an_affine_range_in_a_python_for_is_one_loop_per_pass() -> None:
    x = _rand(128, 64)
    np.testing.assert_array_equal(rewrites_in_a_python_for(x), x * 2)

"""Tile lifetimes in the NKI frontend are Python's: a tile allocated in one loop iteration stays
valid while the kernel still refers to it (lists of tiles built in one loop and read in the
next, as the matrix-multiplication tutorial does), and SBUF capacity is checked on what is live
at each point."""

from __future__ import annotations

import inspect
from typing import Any

import numpy as np
import pytest

import torch_nki.nki.isa as nisa
import torch_nki.nki.language as nl
from torch_nki import nki
from torch_nki.errors import ValidationError


def _rand(*shape: int, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).uniform(-1, 1, shape).astype(np.float32)


def _line_of(fn: Any, marker: str) -> str:
    fn = inspect.unwrap(fn)
    lines, start = inspect.getsourcelines(fn)
    offset = next(i for i, text in enumerate(lines) if marker in text)
    return f"{inspect.getsourcefile(fn)}:{start + offset}"


@nki.jit
def blocked_matmul(lhs_t, rhs):
    """``lhs_tᵀ · rhs`` with every ``lhs_t`` tile loaded once, in a loop of its own, and the
    tiles kept in a list for the loops after it."""
    k, m = lhs_t.shape
    _, n = rhs.shape
    out = nl.ndarray((m, n), dtype=nl.float32, buffer=nl.shared_hbm)
    lhs_tiles = []
    for kk in nl.affine_range(k // 128):
        t = nl.ndarray((128, m), dtype=lhs_t.dtype, buffer=nl.sbuf)  # kept
        nisa.dma_copy(dst=t, src=lhs_t[kk * 128 : (kk + 1) * 128, 0:m])
        lhs_tiles.append(t)
    for nn in nl.affine_range(n // 512):
        acc = nl.ndarray((m, 512), dtype=nl.float32, buffer=nl.psum)
        for kk in nl.affine_range(k // 128):
            r = nl.ndarray((128, 512), dtype=rhs.dtype, buffer=nl.sbuf)
            nisa.dma_copy(dst=r, src=rhs[kk * 128 : (kk + 1) * 128, nn * 512 : (nn + 1) * 512])
            nisa.nc_matmul(dst=acc, stationary=lhs_tiles[kk], moving=r)
        res = nl.ndarray((m, 512), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_copy(dst=res, src=acc)
        nisa.dma_copy(dst=out[0:m, nn * 512 : (nn + 1) * 512], src=res)
    return out


def test_tiles_kept_in_a_list_across_loops_compute_the_product() -> None:
    lhs_t, rhs = _rand(384, 96), _rand(384, 1024, seed=1)
    got = blocked_matmul(lhs_t, rhs)
    np.testing.assert_allclose(got, lhs_t.T.astype(np.float64) @ rhs, rtol=1e-5, atol=1e-5)


def test_a_kept_tile_is_allocated_where_its_uses_still_see_it_and_emits_so() -> None:
    lhs_t, rhs = _rand(256, 64), _rand(256, 512, seed=1)
    program = nki.trace(blocked_matmul, lhs_t, rhs)
    program.validate()
    source = program.emit()
    # Both kept tiles are allocated in the kernel's body, outside the iterations that fill them.
    kept = [line for line in source.splitlines() if "nl.ndarray((128, 64)" in line]
    assert [line[: len(line) - len(line.lstrip())] for line in kept] == ["    ", "    "]
    again = nki.trace(nki.load_source(source, "blocked_matmul").blocked_matmul, lhs_t, rhs)
    assert again.difference(program) is None


def test_keeping_too_many_tiles_alive_fails_with_the_capacity_rule_and_the_line() -> None:
    @nki.jit
    def keeps_all(x):
        out = nl.ndarray((128, 4), dtype=x.dtype, buffer=nl.shared_hbm)
        kept = []
        for i in nl.affine_range(30):
            t = nl.ndarray((128, 2048), dtype=nl.float32, buffer=nl.sbuf)  # 8 KiB a partition
            nisa.memset(dst=t, value=float(i))
            kept.append(t)
        for t in kept:
            nisa.dma_copy(dst=out, src=t[0:128, 0:4])
        return out

    with pytest.raises(ValidationError) as info:
        keeps_all(_rand(128, 4))
    assert info.value.rule == "sbuf-capacity"
    assert info.value.location == _line_of(keeps_all, "# 8 KiB a partition")

    @nki.jit
    def keeps_one_at_a_time(x):
        out = nl.ndarray((128, 4), dtype=x.dtype, buffer=nl.shared_hbm)
        # Every iteration writes all of `out` (the last one's value stays): an order the
        # loop must keep, so sequential_range (affine_range is `affine-range-dependence`).
        for i in nl.sequential_range(30):
            t = nl.ndarray((128, 2048), dtype=nl.float32, buffer=nl.sbuf)
            nisa.memset(dst=t, value=float(i))
            nisa.dma_copy(dst=out, src=t[0:128, 0:4])
        return out

    np.testing.assert_array_equal(keeps_one_at_a_time(_rand(128, 4)), np.full((128, 4), 29.0))


def test_device_loops_with_compile_time_bounds_run_each_iteration() -> None:
    x = _rand(4, 6)

    @nki.jit
    def device_loops(a):
        out = nl.ndarray((4, 6), dtype=nl.float32, buffer=nl.shared_hbm)
        acc = nl.zeros((4, 6), dtype=nl.float32)
        t = nl.load(a)

        def body(i):
            nisa.tensor_tensor(dst=acc, data1=acc, data2=t, op=nl.add)

        nl.fori_loop(0, 3, body)
        for _ in nl.dynamic_range(2):
            nisa.tensor_scalar(dst=acc, data=acc, op0=nl.multiply, operand0=0.5)
        nl.store(out, value=acc)
        return out

    np.testing.assert_allclose(device_loops(x), x * 3 * 0.25, rtol=1e-6)

    @nki.jit
    def register_loop(a):
        nl.while_loop(object(), lambda r: r)
        return a

    with pytest.raises(TypeError, match=r"nl\.while_loop: init must be a VirtualRegister"):
        register_loop(x)

    @nki.jit
    def register_bound(a):
        nl.fori_loop(0, object(), lambda i: None)
        return a

    with pytest.raises(TypeError, match=r"upper must be an int or a VirtualRegister"):
        register_bound(x)

"""Device loops through the frontend, in the style of NKI's dynamic-loops deep dive: a trip count
loaded from a tensor into a register (``nl.dynamic_range`` with register bounds), a constant
bound that still makes a device loop, ``nl.fori_loop`` with the index register, ``while reg:``
and ``nl.while_loop`` on a flag, nested loops; each traced once and simulated by iterating,
checked against hand-computed results. Then capacity inside a body, cost, the emit-and-trace-back
round trip, and the errors of bad use."""

from __future__ import annotations

import numpy as np
import pytest

import torch_nki.nki.isa as nisa
import torch_nki.nki.language as nl
from torch_nki import nki
from torch_nki.errors import ValidationError

from refs import nki_round_trip


def _count(n: int) -> np.ndarray:
    return np.array([[n]], dtype=np.int32)


def _x(rows: int = 4, cols: int = 6) -> np.ndarray:
    return (np.arange(rows * cols, dtype=np.float32).reshape(rows, cols) - 5.0) * 0.25


@nki.jit
def scale_by_count(n, x):
    """``out = x · (number of iterations)``, the trip count read from ``n`` at run time."""
    out = nl.ndarray(x.shape, dtype=nl.float32, buffer=nl.shared_hbm)
    data = nl.load(x)
    acc = nl.zeros(x.shape, dtype=nl.float32)
    n_sb = nl.ndarray((1, 1), dtype=nl.int32, buffer=nl.sbuf)
    nisa.dma_copy(dst=n_sb, src=n)
    stop = nisa.register_alloc()
    nisa.register_load(stop, n_sb)
    start = nisa.register_alloc(0)
    for _ in nl.dynamic_range(start, stop, 1):
        nisa.tensor_tensor(dst=acc, data1=acc, data2=data, op=nl.add)
    nl.store(out, value=acc)
    return out


@pytest.mark.parametrize("n", [0, 1, 3, 10, -2])
def test_a_register_trip_count_runs_the_body_that_often(n: int) -> None:
    x = _x()
    np.testing.assert_array_equal(scale_by_count(_count(n), x), x * max(n, 0))


def test_the_body_is_traced_once() -> None:
    program = nki.trace(scale_by_count, _count(3), _x())
    # dma_copy x, memset acc, dma_copy n, two register_allocs, register_load, the body's one
    # tensor_tensor, the store.
    assert program.instruction_count() == 8
    assert "nl.dynamic_range(r1, r0, 1)" in program.emit()


@nki.jit
def index_sum(x, lo, hi, step):
    """Sums the index register over ``nl.dynamic_range(lo, hi, step)`` (compile-time bounds: a
    device loop all the same), through ``register_store`` into an SBUF tile."""
    out = nl.ndarray((1, 1), dtype=nl.float32, buffer=nl.shared_hbm)
    acc = nl.zeros((1, 1), dtype=nl.float32)
    i_sb = nl.ndarray((1, 1), dtype=nl.int32, buffer=nl.sbuf)
    for i in nl.dynamic_range(lo, hi, step):
        nisa.register_store(i_sb, i)
        nisa.tensor_tensor(dst=acc, data1=acc, data2=i_sb, op=nl.add)
    nl.store(out, value=acc)
    return out


@pytest.mark.parametrize(("lo", "hi", "step"), [(0, 5, 1), (2, 11, 3), (4, 4, 1), (7, 3, 2)])
def test_the_index_register_holds_each_iterations_value(lo: int, hi: int, step: int) -> None:
    got = index_sum(np.zeros((1, 1), np.float32), lo, hi, step)
    np.testing.assert_array_equal(got, [[float(sum(range(lo, hi, step)))]])


def test_fori_loop_passes_the_index_register() -> None:
    @nki.jit
    def triangular(n):
        out = nl.ndarray((1, 1), dtype=nl.float32, buffer=nl.shared_hbm)
        acc = nl.zeros((1, 1), dtype=nl.float32)
        i_sb = nl.ndarray((1, 1), dtype=nl.int32, buffer=nl.sbuf)
        n_sb = nl.ndarray((1, 1), dtype=nl.int32, buffer=nl.sbuf)
        nisa.dma_copy(dst=n_sb, src=n)
        ub = nisa.register_alloc()
        nisa.register_load(ub, n_sb)

        def body(i):
            nisa.register_store(i_sb, i)
            nisa.tensor_tensor(dst=acc, data1=acc, data2=i_sb, op=nl.add)

        nl.fori_loop(1, ub, body)
        nl.store(out, value=acc)
        return out

    for n in (0, 1, 2, 6, 20):
        np.testing.assert_array_equal(triangular(_count(n)), [[float(sum(range(1, n)))]])


@nki.jit
def countdown(n, x):
    """The deep dive's ``while reg:``: adds ``x`` while a counter in SBUF, reloaded into the
    register each iteration, is nonzero."""
    out = nl.ndarray(x.shape, dtype=nl.float32, buffer=nl.shared_hbm)
    data = nl.load(x)
    acc = nl.zeros(x.shape, dtype=nl.float32)
    count = nl.ndarray((1, 1), dtype=nl.int32, buffer=nl.sbuf)
    nisa.dma_copy(dst=count, src=n)
    reg = nisa.register_alloc()
    nisa.register_load(reg, count)
    while reg:
        nisa.tensor_tensor(dst=acc, data1=acc, data2=data, op=nl.add)
        nisa.tensor_scalar(dst=count, data=count, op0=nl.subtract, operand0=1)
        nisa.register_load(reg, count)
    nl.store(out, value=acc)
    return out


@pytest.mark.parametrize("n", [0, 1, 4])
def test_while_reg_loops_until_the_register_is_zero(n: int) -> None:
    x = _x(3, 5)
    np.testing.assert_array_equal(countdown(_count(n), x), x * n)


def test_while_loop_loops_on_the_register_its_body_returns() -> None:
    @nki.jit
    def halvings(n):
        """How often ``n`` halves (integer division by 2) before it reaches 0."""
        out = nl.ndarray((1, 1), dtype=nl.float32, buffer=nl.shared_hbm)
        acc = nl.zeros((1, 1), dtype=nl.float32)
        value = nl.ndarray((1, 1), dtype=nl.int32, buffer=nl.sbuf)
        nisa.dma_copy(dst=value, src=n)
        reg = nisa.register_alloc()
        nisa.register_load(reg, value)

        def body(r):
            nisa.tensor_scalar(dst=acc, data=acc, op0=nl.add, operand0=1.0)
            nisa.tensor_scalar(dst=value, data=value, op0=nl.right_shift, operand0=1)
            nxt = nisa.register_alloc()
            nisa.register_load(nxt, value)
            return nxt

        nl.while_loop(reg, body)
        nl.store(out, value=acc)
        return out

    for n in (0, 1, 5, 64, 1000):
        np.testing.assert_array_equal(halvings(_count(n)), [[float(n.bit_length())]])


def test_nested_device_loops_and_static_loops_inside_them() -> None:
    @nki.jit
    def grid(n, x):
        out = nl.ndarray(x.shape, dtype=nl.float32, buffer=nl.shared_hbm)
        data = nl.load(x)
        acc = nl.zeros(x.shape, dtype=nl.float32)
        n_sb = nl.ndarray((1, 1), dtype=nl.int32, buffer=nl.sbuf)
        nisa.dma_copy(dst=n_sb, src=n)
        reg = nisa.register_alloc()
        nisa.register_load(reg, n_sb)
        for i in nl.dynamic_range(reg):
            for _ in nl.dynamic_range(0, i):
                for _ in nl.affine_range(2):
                    t = nl.ndarray(x.shape, dtype=nl.float32, buffer=nl.sbuf)
                    nisa.tensor_copy(dst=t, src=data)
                    nisa.tensor_tensor(dst=acc, data1=acc, data2=t, op=nl.add)
        nl.store(out, value=acc)
        return out

    x = _x(2, 3)
    for n in (0, 1, 3, 5):
        np.testing.assert_array_equal(grid(_count(n), x), x * (2 * n * (n - 1) // 2))


def test_a_device_loop_body_keeps_its_tiles_within_capacity() -> None:
    @nki.jit
    def too_big(n):
        out = nl.ndarray((1, 1), dtype=nl.int32, buffer=nl.shared_hbm)
        keep = nl.ndarray((128, 40000), dtype=nl.float32, buffer=nl.sbuf)
        nisa.memset(dst=keep, value=0.0)
        for _ in nl.dynamic_range(2):
            t = nl.ndarray((128, 30000), dtype=nl.float32, buffer=nl.sbuf)
            nisa.tensor_copy(dst=t, src=keep[:, 0:30000])
        nisa.dma_copy(dst=out, src=n)
        return out

    with pytest.raises(ValidationError) as e:
        too_big(_count(1))
    assert e.value.rule == "sbuf-capacity"


def test_cost_charges_a_register_bounded_body_once() -> None:
    program = nki.trace(scale_by_count, _count(3), _x(128, 512))
    _, summary, _ = program.cost()
    assert '"vector"' in summary or "vector" in summary


def test_device_loops_round_trip_through_emitted_source() -> None:
    source = nki_round_trip(scale_by_count, _count(2), _x())
    assert "for r2 in nl.dynamic_range(r1, r0, 1):" in source
    source = nki_round_trip(countdown, _count(2), _x())
    assert "nl.while_loop(r0, _while0)" in source
    # The emitted kernel simulates to the same values.
    emitted = nki.load_source(source, "countdown").__dict__["countdown"]
    x = _x()
    np.testing.assert_array_equal(emitted(_count(3), x), x * 3)


def test_misuse_of_registers_in_python_is_an_error() -> None:
    @nki.jit
    def branch(n):
        out = nl.ndarray((1, 1), dtype=nl.int32, buffer=nl.shared_hbm)
        reg = nisa.register_alloc(1)
        if reg:
            pass
        nisa.dma_copy(dst=out, src=n)
        return out

    with pytest.raises(TypeError, match="no truth value while tracing"):
        branch(_count(1))

    @nki.jit
    def as_int(n):
        out = nl.ndarray((1, 1), dtype=nl.int32, buffer=nl.shared_hbm)
        for i in nl.dynamic_range(3):
            nl.ds(int(i), 1)
        nisa.dma_copy(dst=out, src=n)
        return out

    with pytest.raises(TypeError, match=r"int\(\) of VirtualRegister"):
        as_int(_count(1))

    @nki.jit
    def register_step(n):
        out = nl.ndarray((1, 1), dtype=nl.int32, buffer=nl.shared_hbm)
        for _ in nl.dynamic_range(0, 4, nisa.register_alloc(1)):
            pass
        nisa.dma_copy(dst=out, src=n)
        return out

    with pytest.raises(TypeError, match="step must be a compile-time positive int"):
        register_step(_count(1))

    @nki.jit
    def broken_while(n):
        out = nl.ndarray((1, 1), dtype=nl.int32, buffer=nl.shared_hbm)
        reg = nisa.register_alloc(1)
        while reg:
            break
        nisa.dma_copy(dst=out, src=n)
        return out

    with pytest.raises(TypeError, match="ended without testing its register again"):
        broken_while(_count(1))

    @nki.jit
    def bad_while(n):
        nl.while_loop(3, lambda r: r)
        return n

    with pytest.raises(TypeError, match="init must be a VirtualRegister"):
        bad_while(_count(1))

    @nki.jit
    def bad_body(n):
        out = nl.ndarray((1, 1), dtype=nl.int32, buffer=nl.shared_hbm)
        nl.while_loop(nisa.register_alloc(0), lambda r: 0)
        nisa.dma_copy(dst=out, src=n)
        return out

    with pytest.raises(TypeError, match="must return the next condition register"):
        bad_body(_count(1))

    @nki.jit
    def float_bound(n):
        out = nl.ndarray((1, 1), dtype=nl.int32, buffer=nl.shared_hbm)
        for _ in nl.dynamic_range(2.5):
            pass
        nisa.dma_copy(dst=out, src=n)
        return out

    with pytest.raises(TypeError, match="stop must be an int or a VirtualRegister"):
        float_bound(_count(1))


def test_register_begin_and_end_with_a_step() -> None:
    """The deep dive's ``dynamic_range(begin, end, 2)`` with both bounds registers."""

    @nki.jit
    def stepped(bounds):
        out = nl.ndarray((1, 1), dtype=nl.float32, buffer=nl.shared_hbm)
        acc = nl.zeros((1, 1), dtype=nl.float32)
        i_sb = nl.ndarray((1, 1), dtype=nl.int32, buffer=nl.sbuf)
        b_sb = nl.load(bounds)
        begin = nisa.register_alloc(b_sb[0:1, 0:1])
        end = nisa.register_alloc(b_sb[0:1, 1:2])
        for i in nl.dynamic_range(begin, end, 2):
            nisa.register_store(i_sb, i)
            nisa.tensor_tensor(dst=acc, data1=acc, data2=i_sb, op=nl.add)
        nl.store(out, value=acc)
        return out

    for lo, hi in [(0, 4), (3, 10), (5, 5), (-4, 3)]:
        got = stepped(np.array([[lo, hi]], dtype=np.int32))
        np.testing.assert_array_equal(got, [[float(sum(range(lo, hi, 2)))]])


def test_tiles_kept_across_static_iterations_inside_a_device_loop() -> None:
    """A list of tiles filled in one ``affine_range`` and read in the next, inside a device
    loop's body (their allocations move out of the one-iteration scopes, not out of the body)."""

    @nki.jit
    def blocks(n, x):
        out = nl.ndarray(x.shape, dtype=nl.float32, buffer=nl.shared_hbm)
        acc = nl.zeros(x.shape, dtype=nl.float32)
        n_sb = nl.load(n)
        reg = nisa.register_alloc(n_sb)
        for _ in nl.dynamic_range(reg):
            parts = []
            for j in nl.affine_range(2):
                t = nl.ndarray((2, 3), dtype=nl.float32, buffer=nl.sbuf)
                nisa.dma_copy(dst=t, src=x[2 * j : 2 * j + 2, :])
                parts.append(t)
            for j in nl.affine_range(2):
                nisa.tensor_tensor(
                    dst=acc[2 * j : 2 * j + 2, :], data1=acc[2 * j : 2 * j + 2, :], data2=parts[j], op=nl.add
                )
        nl.store(out, value=acc)
        return out

    x = _x(4, 3)
    for n in (0, 2, 3):
        np.testing.assert_array_equal(blocks(_count(n), x), x * n)


def test_no_reorder_goes_inside_a_device_loop_not_around_it() -> None:
    @nki.jit
    def inside(n):
        out = nl.ndarray((1, 1), dtype=nl.float32, buffer=nl.shared_hbm)
        acc = nl.zeros((1, 1), dtype=nl.float32)
        for _ in nl.dynamic_range(nisa.register_alloc(nl.load(n))):
            with nl.no_reorder():
                nisa.tensor_scalar(dst=acc, data=acc, op0=nl.add, operand0=2.0)
        nl.store(out, value=acc)
        return out

    np.testing.assert_array_equal(inside(_count(4)), [[8.0]])

    @nki.jit
    def around(n):
        out = nl.ndarray((1, 1), dtype=nl.int32, buffer=nl.shared_hbm)
        with nl.no_reorder():
            for _ in nl.dynamic_range(2):
                pass
        nisa.dma_copy(dst=out, src=n)
        return out

    with pytest.raises(TypeError, match=r"nl\.dynamic_range inside nl\.no_reorder\(\) is not supported"):
        around(_count(1))

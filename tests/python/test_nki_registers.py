"""The register instructions through the frontend: ``nisa.register_alloc`` (with a value,
without, and from a one-element tensor as AWS's kernels write it), ``register_move``,
``register_load`` from HBM and SBUF, ``register_store`` to both (a narrower dtype saturates);
values checked exactly. Then the round trip and the errors: non-integer or multi-element
operands, PSUM, registers of another call, unwritten registers."""

from __future__ import annotations

import numpy as np
import pytest

import torch_nki.nki.isa as nisa
import torch_nki.nki.language as nl
from torch_nki import nki
from torch_nki.errors import SimulationError, TraceError, ValidationError

from refs import nki_round_trip


@nki.jit
def shuffle(v):
    """Loads ``v[0, 0]`` and ``v[0, 1]`` into registers, moves them around and stores five
    values."""
    out = nl.ndarray((1, 5), dtype=nl.int32, buffer=nl.shared_hbm)
    small = nl.ndarray((1, 1), dtype=nl.int8, buffer=nl.shared_hbm)
    a = nisa.register_alloc(7)
    b = nisa.register_alloc()
    nisa.register_load(b, v[0:1, 0:1])
    v_sb = nl.load(v)
    c = nisa.register_alloc(v_sb[0:1, 1:2])
    d = nisa.register_alloc()
    nisa.register_move(d, a)
    t = nl.ndarray((1, 5), dtype=nl.int32, buffer=nl.sbuf)
    nisa.register_store(t[0:1, 0:1], a)
    nisa.register_store(t[0:1, 1:2], b)
    nisa.register_store(t[0:1, 2:3], c)
    nisa.register_store(t[0:1, 3:4], d)
    nisa.register_move(a, -12345)
    nisa.register_store(t[0:1, 4:5], a)
    nl.store(out, value=t)
    nisa.register_store(small, b)
    return out, small


def test_registers_carry_values_between_tensors() -> None:
    v = np.array([[300, -9]], dtype=np.int32)
    out, small = shuffle(v)
    np.testing.assert_array_equal(out, [[7, 300, -9, 7, -12345]])
    np.testing.assert_array_equal(small, [[127]])
    assert isinstance(nisa.register_alloc, object)


def test_register_alloc_returns_a_virtual_register() -> None:
    seen = []

    @nki.jit
    def k(v):
        r = nisa.register_alloc(1)
        seen.append(r)
        out = nl.ndarray((1, 1), dtype=nl.int32, buffer=nl.shared_hbm)
        nisa.register_store(out, r)
        return out

    np.testing.assert_array_equal(k(np.zeros((1, 1), np.int32)), [[1]])
    assert isinstance(seen[0], nisa.VirtualRegister)
    assert repr(seen[0]) == "VirtualRegister(r0)"


def test_registers_round_trip_through_emitted_source() -> None:
    source = nki_round_trip(shuffle, np.array([[1, 2]], dtype=np.int32))
    for line in ("r0 = nisa.register_alloc(x=7)", "nisa.register_move(dst=r3, src=r0)"):
        assert line in source, source


def _fails(body, v: np.ndarray | None = None) -> Exception:  # type: ignore[no-untyped-def]
    @nki.jit
    def k(x):
        body(x)
        out = nl.ndarray((1, 1), dtype=nl.int32, buffer=nl.shared_hbm)
        nisa.dma_copy(dst=out, src=x[0:1, 0:1])
        return out

    with pytest.raises(Exception) as e:
        k(np.zeros((2, 2), np.int32) if v is None else v)
    return e.value


def test_bad_register_operands_are_errors_at_the_call() -> None:
    def two_elements(x):  # type: ignore[no-untyped-def]
        nisa.register_load(nisa.register_alloc(), x[0:1, 0:2])

    e = _fails(two_elements)
    assert isinstance(e, TraceError) and "src must be one element" in str(e)

    def float_tile(x):  # type: ignore[no-untyped-def]
        t = nl.zeros((1, 1), dtype=nl.float32)
        nisa.register_load(nisa.register_alloc(), t)

    e = _fails(float_tile)
    assert isinstance(e, TraceError) and "a register holds an integer" in str(e)

    def psum(x):  # type: ignore[no-untyped-def]
        t = nl.ndarray((1, 1), dtype=nl.int32, buffer=nl.psum)
        nisa.register_store(t, nisa.register_alloc(1))

    e = _fails(psum)
    assert isinstance(e, ValidationError) and e.rule == "dma-psum"

    def int_destination(x):  # type: ignore[no-untyped-def]
        nisa.register_move(3, 4)

    e = _fails(int_destination)
    assert isinstance(e, TypeError) and "dst must be a VirtualRegister" in str(e)

    def float_value(x):  # type: ignore[no-untyped-def]
        nisa.register_alloc(1.5)

    e = _fails(float_value)
    assert isinstance(e, TypeError) and "x must be an int" in str(e)


def test_a_register_of_another_call_is_refused() -> None:
    kept = []

    @nki.jit
    def first(x):
        kept.append(nisa.register_alloc(1))
        out = nl.ndarray((1, 1), dtype=nl.int32, buffer=nl.shared_hbm)
        nisa.register_store(out, kept[0])
        return out

    @nki.jit
    def second(x):
        out = nl.ndarray((1, 1), dtype=nl.int32, buffer=nl.shared_hbm)
        nisa.register_store(out, kept[0])
        return out

    first(np.zeros((1, 1), np.int32))
    with pytest.raises(ValueError, match="belongs to another kernel call"):
        second(np.zeros((1, 1), np.int32))


def test_reading_an_unwritten_register_is_a_simulation_error() -> None:
    @nki.jit
    def k(x):
        out = nl.ndarray((1, 1), dtype=nl.int32, buffer=nl.shared_hbm)
        nisa.register_store(out, nisa.register_alloc())
        return out

    with pytest.raises(SimulationError, match="read before anything wrote it"):
        k(np.zeros((1, 1), np.int32))

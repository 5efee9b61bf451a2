"""``reverse0`` / ``reverse1`` of ``tensor_scalar``, ``scalar_tensor_tensor`` and
``tensor_scalar_reduce``: each flag swaps its operator's operands (``operand <op> data``), as the
NKI 0.7 API docs define them; simulated, emitted and traced back."""

from __future__ import annotations

import numpy as np
import pytest

import torch_nki.nki.isa as nisa
import torch_nki.nki.language as nl
from torch_nki import nki


@nki.jit(target="trn2")
def reversed_operands(x, y):
    """Five results side by side in a (4, 5·8) output."""
    out = nl.ndarray((4, 40), dtype=nl.float32, buffer=nl.shared_hbm)
    t, u = nl.load(x), nl.load(y)
    r = nl.ndarray((4, 40), dtype=nl.float32, buffer=nl.sbuf)
    col = nl.ndarray((4, 1), dtype=nl.float32, buffer=nl.sbuf)
    nisa.memset(dst=col, value=3.0)
    # 10 - x, then 2 / that
    nisa.tensor_scalar(
        dst=r[:, 0:8],
        data=t,
        op0=nl.subtract,
        operand0=10.0,
        reverse0=True,
        op1=nl.divide,
        operand1=2.0,
        reverse1=True,
    )
    # (x - col) then y - that
    nisa.scalar_tensor_tensor(
        dst=r[:, 8:16], data=t, op0=nl.subtract, operand0=col, op1=nl.subtract, operand1=u, reverse1=True
    )
    # (col - x) / y
    nisa.scalar_tensor_tensor(
        dst=r[:, 16:24], data=t, op0=nl.subtract, operand0=col, op1=nl.divide, operand1=u, reverse0=True
    )
    # (1 - x) with the row sums
    sums = nl.ndarray((4, 1), dtype=nl.float32, buffer=nl.sbuf)
    nisa.tensor_scalar_reduce(
        dst=r[:, 24:32],
        data=t,
        op0=nl.subtract,
        operand0=1.0,
        reverse0=True,
        reduce_op=nl.add,
        reduce_res=sums,
    )
    # y / (x / 4), reduced by max
    peak = nl.ndarray((4, 1), dtype=nl.float32, buffer=nl.sbuf)
    nisa.scalar_tensor_tensor(
        dst=r[:, 32:40],
        data=t,
        op0=nl.divide,
        operand0=4.0,
        op1=nl.divide,
        operand1=u,
        reverse1=True,
        reduce_op=nl.maximum,
        reduce_res=peak,
    )
    nl.store(out, value=r)
    stats = nl.ndarray((4, 2), dtype=nl.float32, buffer=nl.shared_hbm)
    nl.store(stats[:, 0:1], value=sums)
    nl.store(stats[:, 1:2], value=peak)
    return out, stats


def _inputs() -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(7)
    x = rng.uniform(0.5, 2.0, (4, 8)).astype(np.float32)
    y = rng.uniform(0.5, 2.0, (4, 8)).astype(np.float32)
    return x, y


def test_each_flag_swaps_its_operators_operands() -> None:
    x, y = _inputs()
    out, stats = nki.simulate(reversed_operands)(x, y)
    f = np.float32
    np.testing.assert_allclose(out[:, 0:8], f(2) / (f(10) - x), rtol=1e-6)
    np.testing.assert_allclose(out[:, 8:16], y - (x - f(3)), rtol=1e-6)
    np.testing.assert_allclose(out[:, 16:24], (f(3) - x) / y, rtol=1e-6)
    np.testing.assert_allclose(out[:, 24:32], f(1) - x, rtol=1e-6)
    np.testing.assert_allclose(stats[:, 0], (f(1) - x).sum(axis=1), rtol=1e-5)
    np.testing.assert_allclose(out[:, 32:40], y / (x / f(4)), rtol=1e-6)
    np.testing.assert_allclose(stats[:, 1], (y / (x / f(4))).max(axis=1), rtol=1e-6)


def test_the_flags_are_emitted_only_when_set_and_trace_back_to_the_same_program() -> None:
    x, y = _inputs()
    program = nki.trace(reversed_operands, x, y)
    source = program.emit()
    assert source.count("reverse0=True") == 3 and source.count("reverse1=True") == 3
    assert "reverse0=False" not in source and "reverse1=False" not in source
    again = nki.trace(nki.load_source(source, "reversed_operands").reversed_operands, x, y)
    assert again.difference(program) is None


def test_a_shift_with_the_data_as_its_amount() -> None:
    @nki.jit(target="trn2")
    def shifts(x):
        out = nl.ndarray(x.shape, dtype=nl.int32, buffer=nl.shared_hbm)
        t = nl.ndarray(x.shape, dtype=nl.int32, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=x)
        nisa.tensor_scalar(dst=t, data=t, op0=nl.left_shift, operand0=1, reverse0=True)  # 1 << x
        nl.store(out, value=t)
        return out

    x = np.arange(8, dtype=np.int32).reshape(2, 4)
    np.testing.assert_array_equal(nki.simulate(shifts)(x), 1 << x)


def test_reverse1_without_a_second_operator_is_a_value_error() -> None:
    @nki.jit
    def lonely(x):
        out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
        t = nl.load(x)
        nisa.tensor_scalar(dst=t, data=t, op0=nl.add, operand0=1.0, reverse1=True)
        nl.store(out, value=t)
        return out

    with pytest.raises(ValueError, match="reverse1=True needs op1 and operand1"):
        nki.simulate(lonely)(np.zeros((2, 2), np.float32))

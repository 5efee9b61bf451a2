"""Every ALU operator and activation function of NKI 0.7 through the frontend: the bitvec
operators on integer tiles (as ``op=`` values and tile-level calls), the logical, power and
absolute operators, unary operators lowered to ``tensor_scalar``, the newer activation
functions against torch, emitted source that traces back to the same program, and the errors
for misuse."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

import torch_nki.nki.isa as nisa
import torch_nki.nki.language as nl
from torch_nki import nki
from torch_nki.errors import TraceError, ValidationError

from refs import nki_round_trip


@nki.jit
def bit_ops(a, b):
    """``(a & b, a | b, a ^ b, a << 2, ~a)`` of two int32 tiles, the last two through
    ``tensor_scalar`` and a tile-level unary call."""
    p, n = a.shape
    out = nl.ndarray((p, 5 * n), dtype=a.dtype, buffer=nl.shared_hbm)
    ta, tb = nl.load(a), nl.load(b)
    r = nl.ndarray((p, 5 * n), dtype=a.dtype, buffer=nl.sbuf)
    nisa.tensor_tensor(dst=r[:, 0:n], data1=ta, data2=tb, op=nl.bitwise_and)
    nisa.tensor_tensor(dst=r[:, n : 2 * n], data1=ta, data2=tb, op=nl.bitwise_or)
    r[:, 2 * n : 3 * n] = nl.bitwise_xor(ta, tb)
    nisa.tensor_scalar(dst=r[:, 3 * n : 4 * n], data=ta, op0=nl.left_shift, operand0=2)
    r[:, 4 * n : 5 * n] = nl.invert(ta)
    nl.store(out, value=r)
    return out


def test_bitvec_operators_work_on_int32_patterns() -> None:
    rng = np.random.default_rng(0)
    a = rng.integers(-1000, 1000, (4, 8)).astype(np.int32)
    b = rng.integers(-1000, 1000, (4, 8)).astype(np.int32)
    got = nki.simulate(bit_ops)(a, b)
    want = np.concatenate([a & b, a | b, a ^ b, a << 2, ~a], axis=1)
    np.testing.assert_array_equal(np.asarray(got), want)
    source = nki_round_trip(bit_ops, a, b)
    assert "op=nl.bitwise_xor" in source and "op0=nl.invert" in source


@nki.jit
def uint8_shift_and_reduce(x):
    """``x >> 1`` keeping uint8's low bits, and each row's bitwise_or."""
    p, n = x.shape
    out = nl.ndarray((p, n + 1), dtype=x.dtype, buffer=nl.shared_hbm)
    t = nl.load(x)
    r = nl.ndarray((p, n + 1), dtype=x.dtype, buffer=nl.sbuf)
    nisa.tensor_scalar(dst=r[:, 0:n], data=t, op0=nl.right_shift, operand0=1)
    nisa.tensor_reduce(dst=r[:, n : n + 1], op=nl.bitwise_or, data=t, axis=1)
    nl.store(out, value=r)
    return out


def test_shifts_and_bitwise_reductions_in_uint8() -> None:
    x = np.random.default_rng(1).integers(0, 256, (3, 16)).astype(np.uint8)
    got = np.asarray(nki.simulate(uint8_shift_and_reduce)(x))
    np.testing.assert_array_equal(got[:, :16], x >> 1)
    np.testing.assert_array_equal(got[:, 16], np.bitwise_or.reduce(x, axis=1))
    nki_round_trip(uint8_shift_and_reduce, x)


@nki.jit
def arithmetic_ops(a, b):
    """Logical, power and absolute operators, and unary ``nl.abs`` via ``tensor_scalar``."""
    p, n = a.shape
    out = nl.ndarray((p, 5 * n), dtype=a.dtype, buffer=nl.shared_hbm)
    ta, tb = nl.load(a), nl.load(b)
    r = nl.ndarray((p, 5 * n), dtype=a.dtype, buffer=nl.sbuf)
    r[:, 0:n] = nl.logical_and(ta, tb)
    r[:, n : 2 * n] = nl.logical_xor(ta, tb)
    r[:, 2 * n : 3 * n] = nl.power(nl.abs(ta), tb)
    nisa.tensor_tensor(dst=r[:, 3 * n : 4 * n], data1=ta, data2=tb, op=nl.logical_or)
    nisa.tensor_scalar(
        dst=r[:, 4 * n : 5 * n], data=ta, op0=nl.abs, operand0=0.0, op1=nl.multiply, operand1=2.0
    )
    nl.store(out, value=r)
    return out


def test_logical_power_and_absolute_operators() -> None:
    rng = np.random.default_rng(2)
    a = rng.uniform(-2, 2, (4, 8)).astype(np.float32)
    a[0, :3] = 0.0
    b = rng.integers(0, 3, (4, 8)).astype(np.float32)
    got = np.asarray(nki.simulate(arithmetic_ops)(a, b))
    n = 8
    np.testing.assert_array_equal(got[:, 0:n], ((a != 0) & (b != 0)).astype(np.float32))
    np.testing.assert_array_equal(got[:, n : 2 * n], ((a != 0) ^ (b != 0)).astype(np.float32))
    np.testing.assert_allclose(got[:, 2 * n : 3 * n], np.abs(a) ** b, rtol=1e-6)
    np.testing.assert_array_equal(got[:, 3 * n : 4 * n], ((a != 0) | (b != 0)).astype(np.float32))
    np.testing.assert_array_equal(got[:, 4 * n :], np.abs(a) * 2)
    nki_round_trip(arithmetic_ops, a, b)


_TORCH = {
    "softplus": torch.nn.functional.softplus,
    "mish": torch.nn.functional.mish,
    "erf": torch.erf,
    "sin": torch.sin,
    "arctan": torch.atan,
    "sign": torch.sign,
    "abs": torch.abs,
    "gelu_apprx_sigmoid": lambda x: x * torch.sigmoid(1.702 * x),
    "erf_dx": lambda x: 2 / math.sqrt(math.pi) * torch.exp(-x * x),
}


@pytest.mark.parametrize("name", sorted(_TORCH))
def test_the_newer_activation_functions_match_torch(name: str) -> None:
    fn = getattr(nl, name)

    @nki.jit
    def act(x):
        out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
        nl.store(out, value=fn(nl.load(x)))
        return out

    x = np.random.default_rng(3).uniform(-3, 3, (8, 32)).astype(np.float32)
    got = torch.as_tensor(np.asarray(nki.simulate(act)(x)))
    torch.testing.assert_close(got, _TORCH[name](torch.from_numpy(x)), rtol=2e-6, atol=2e-6)


def test_operator_misuse_names_the_call() -> None:
    a = np.ones((4, 8), dtype=np.float32)
    i = np.ones((4, 8), dtype=np.int32)

    @nki.jit
    def unary_in_tensor_tensor(x):
        out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
        t = nl.load(x)
        nisa.tensor_tensor(dst=t, data1=t, data2=t, op=nl.abs)
        nl.store(out, value=t)
        return out

    with pytest.raises(TraceError, match=r"tensor_tensor: op=nl\.abs is a unary operator"):
        nki.simulate(unary_in_tensor_tensor)(a)

    @nki.jit
    def bitvec_on_floats(x):
        out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
        nl.store(out, value=nl.bitwise_and(nl.load(x), nl.load(x)))
        return out

    with pytest.raises(TraceError, match=r"bitvec operator nl\.bitwise_and works on integer bit patterns"):
        nki.simulate(bitvec_on_floats)(a)

    @nki.jit
    def mixed_families(x):
        out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
        t = nl.load(x)
        nisa.tensor_scalar(dst=t, data=t, op0=nl.bitwise_and, operand0=1, op1=nl.add, operand1=1)
        nl.store(out, value=t)
        return out

    with pytest.raises(TraceError, match=r"must both be bitvec or both arithmetic"):
        nki.simulate(mixed_families)(i)

    @nki.jit
    def two_operand_call_with_one(x):
        out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
        nl.store(out, value=nl.bitwise_and(nl.load(x)))
        return out

    with pytest.raises(TypeError, match=r"nl\.bitwise_and takes two operands"):
        nki.simulate(two_operand_call_with_one)(i)

    @nki.jit
    def abs_max(x):
        out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
        nl.store(out, value=nl.abs_max(nl.load(x), nl.load(x)))
        return out

    with pytest.raises(ValidationError, match=r"operator-target"):
        nki.simulate(abs_max)(a)
    on_trn3 = nki.jit(target="trn3")(abs_max.__wrapped__)
    np.testing.assert_array_equal(np.asarray(nki.simulate(on_trn3)(-a)), a)


@nki.jit
def composite(c, x, y):
    """``nl.where`` (tile and number branches), ``nl.logical_not``, ``nl.cos``, ``nl.tan`` and
    the buffer predicates."""
    p, n = c.shape
    out = nl.ndarray((p, 5 * n), dtype=nl.float32, buffer=nl.shared_hbm)
    tc, tx, ty = nl.load(c), nl.load(x), nl.load(y)
    r = nl.ndarray((p, 5 * n), dtype=nl.float32, buffer=nl.sbuf)
    r[:, 0:n] = nl.where(tc, tx, ty)
    r[:, n : 2 * n] = nl.where(tc, 3.0, ty)
    r[:, 2 * n : 3 * n] = nl.logical_not(tc)
    r[:, 3 * n : 4 * n] = nl.cos(tx)
    r[:, 4 * n : 5 * n] = nl.tan(tx)
    assert nl.is_sbuf(tc) and nl.is_on_chip(nl.psum) and nl.is_hbm(x) and not nl.is_psum(nl.sbuf)
    assert nl.is_hbm(nl.shared_hbm) and not nl.is_on_chip(out)
    nl.store(out, value=r)
    return out


def test_where_logical_not_cos_tan_and_the_buffer_predicates() -> None:
    rng = np.random.default_rng(4)
    c = (rng.uniform(size=(4, 8)) > 0.5).astype(np.float32)
    x = rng.uniform(-3, 3, (4, 8)).astype(np.float32)
    y = rng.uniform(-1, 1, (4, 8)).astype(np.float32)
    got = np.asarray(nki.simulate(composite)(c, x, y))
    np.testing.assert_array_equal(got[:, 0:8], np.where(c != 0, x, y))
    np.testing.assert_array_equal(got[:, 8:16], np.where(c != 0, 3.0, y))
    np.testing.assert_array_equal(got[:, 16:24], 1 - c)
    np.testing.assert_allclose(got[:, 24:32], np.cos(x), atol=3e-7)
    np.testing.assert_allclose(got[:, 32:40], np.tan(x), rtol=1e-5, atol=1e-6)
    nki_round_trip(composite, c, x, y)
    with pytest.raises(TypeError, match=r"nl\.is_sbuf: expected an nl buffer"):
        nl.is_sbuf("dram")

    @nki.jit
    def mismatched(c):
        out = nl.ndarray(c.shape, dtype=c.dtype, buffer=nl.shared_hbm)
        t = nl.load(c)
        nl.store(out, value=nl.where(t, t[:, 0:4], 1.0))
        return out

    with pytest.raises(ValueError, match=r"nl\.where: x has shape \(4, 4\) but the condition has \(4, 8\)"):
        nki.simulate(mismatched)(c)


def test_packed_dtypes_are_names_and_a_converting_dma_of_one_is_refused() -> None:
    assert nl.float4_e2m1fn_x4 in (nl.float8_e4m3fn_x4, nl.float4_e2m1fn_x4)
    assert repr(nl.float8_e5m2_x4) == "nl.float8_e5m2_x4"

    @nki.jit
    def packed(x):
        out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
        t = nl.ndarray(x.shape, dtype=nl.float8_e5m2_x4, buffer=nl.sbuf)
        nl.store(out, value=t)
        return out

    # test_nki_mx.py has the rest: a packed tile is copied, never converted.
    with pytest.raises(ValidationError, match=r"packed MX data is copied, never converted") as e:
        nki.simulate(packed)(np.ones((2, 2), np.float32))
    assert e.value.rule == "mx-packed-dma"


def test_jit_keeps_compiler_options_and_refuses_platform_target() -> None:
    @nki.jit(debug_kernel=True, show_compiler_tb=True, mode="auto")
    def copy(x):
        out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
        nl.store(out, value=nl.load(x))
        return out

    assert copy.compiler_options == {"debug_kernel": True, "show_compiler_tb": True, "mode": "auto"}
    np.testing.assert_array_equal(nki.simulate(copy)(np.ones((2, 2), np.float32)), np.ones((2, 2)))
    with pytest.raises(TypeError, match=r"platform_target= was removed in NKI 0\.3"):
        nki.jit(platform_target="trn2")

"""``nisa.activate2`` through the frontend (NeuronCore-v4, ``trn3``): every keyword against a
NumPy/torch reference of the docs' pseudocode (the six stage pairs, reversed operands, immediates
and ``(P, 1)`` columns, ``nl.prelu`` with its ``relu_param``, each reduction), the emitted source
tracing back to the same program, and the errors for misuse."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import torch_nki.nki.isa as nisa
import torch_nki.nki.language as nl
from torch_nki import nki
from torch_nki.errors import TraceError, ValidationError

from refs import nki_round_trip

_OPS = {"multiply": np.multiply, "add": np.add, "subtract": np.subtract}


def _stage(x: np.ndarray, op: str, v: np.ndarray | float, reverse: bool) -> np.ndarray:
    if op == "bypass":
        return x
    f = _OPS[op]
    return f(v, x) if reverse else f(x, v)


def _kernel(
    op0: str, op1: str, func: str, columns: bool, reverse: tuple[bool, bool], reduce: str | None
) -> nki.Kernel:
    """activate2 of x with op0/op1 (operands 1.5 / -0.75, or the columns c0 / c1), relu_param
    alpha (a column when ``columns``), optionally reducing into a second output."""

    @nki.jit(target="trn3")
    def k(x, c0, c1, alpha):
        p, n = x.shape
        out = nl.ndarray((p, n), dtype=x.dtype, buffer=nl.shared_hbm)
        t, s0, s1, a = nl.load(x), nl.load(c0), nl.load(c1), nl.load(alpha)
        r = nl.ndarray((p, n), dtype=x.dtype, buffer=nl.sbuf)
        imm0, imm1, param = (s0, s1, a) if columns else (1.5, -0.75, 0.125)
        kw = {}
        if reverse[0]:
            kw["reverse0"] = True
        if reverse[1]:
            kw["reverse1"] = True
        if reduce is None:
            nisa.activate2(
                dst=r, op=getattr(nl, func), data=t, imm0=imm0, imm1=imm1,
                op0=getattr(nl, op0), op1=getattr(nl, op1), relu_param=param, **kw,
            )  # fmt: skip
            nl.store(out, value=r)
            return out
        res = nl.ndarray((p, 1), dtype=nl.float32, buffer=nl.sbuf)
        nisa.activate2(
            dst=r, op=getattr(nl, func), data=t, imm0=imm0, imm1=imm1, op0=getattr(nl, op0),
            op1=getattr(nl, op1), relu_param=param, reduce_op=getattr(nl, reduce), reduce_res=res,
            reduce_cmd=nisa.reduce_cmd.reset_reduce, **kw,
        )  # fmt: skip
        totals = nl.ndarray((p, 1), dtype=nl.float32, buffer=nl.shared_hbm)
        nl.store(out, value=r)
        nl.store(totals, value=res)
        return out, totals

    return k


_FUNCS = {
    "gelu": lambda t, a: torch.nn.functional.gelu(t),
    "exp": lambda t, a: torch.exp(t),
    "prelu": lambda t, a: torch.where(t > 0, t, t * a),
    "copy": lambda t, a: t,
    "tanh": lambda t, a: torch.tanh(t),
}

_PAIRS = [
    ("multiply", "add"),
    ("multiply", "subtract"),
    ("multiply", "bypass"),
    ("add", "bypass"),
    ("subtract", "bypass"),
    ("bypass", "bypass"),
]


def _inputs(p: int, n: int, seed: int) -> tuple[np.ndarray, ...]:
    rng = np.random.default_rng(seed)
    x = rng.uniform(-3, 3, (p, n)).astype(np.float32)
    c0 = rng.uniform(0.5, 2.0, (p, 1)).astype(np.float32)
    c1 = rng.uniform(-1.0, 1.0, (p, 1)).astype(np.float32)
    alpha = rng.uniform(0.05, 0.3, (p, 1)).astype(np.float32)
    return x, c0, c1, alpha


def _reference(x, c0, c1, alpha, op0, op1, func, columns, reverse):  # type: ignore[no-untyped-def]
    imm0, imm1, param = (
        (c0, c1, alpha) if columns else (np.float32(1.5), np.float32(-0.75), np.float32(0.125))
    )
    t = _stage(_stage(x, op0, imm0, reverse[0]), op1, imm1, reverse[1])
    return _FUNCS[func](
        torch.from_numpy(np.asarray(t, np.float32)), torch.from_numpy(np.asarray(param, np.float32))
    ).numpy()


@pytest.mark.parametrize("op0,op1", _PAIRS)
@pytest.mark.parametrize("func", sorted(_FUNCS))
@pytest.mark.parametrize("columns", [False, True])
def test_activate2_matches_the_docs_pipeline(op0: str, op1: str, func: str, columns: bool) -> None:
    x, c0, c1, alpha = _inputs(8, 24, 1)
    reverse = (op0 != "bypass", False) if op0 == "subtract" else (False, op1 == "subtract")
    got = nki.simulate(_kernel(op0, op1, func, columns, reverse, None))(x, c0, c1, alpha)
    want = _reference(x, c0, c1, alpha, op0, op1, func, columns, reverse)
    np.testing.assert_allclose(np.asarray(got), want, rtol=2e-6, atol=1e-6)


@pytest.mark.parametrize("reduce", ["add", "maximum", "minimum", "abs_max", "abs_min"])
def test_activate2_reduces_each_row(reduce: str) -> None:
    x, c0, c1, alpha = _inputs(128, 200, 2)
    k = _kernel("multiply", "add", "prelu", True, (False, False), reduce)
    got, totals = nki.simulate(k)(x, c0, c1, alpha)
    want = _reference(x, c0, c1, alpha, "multiply", "add", "prelu", True, (False, False))
    np.testing.assert_allclose(np.asarray(got), want, rtol=1e-6, atol=1e-7)
    fold = {
        "add": lambda v: v.sum(axis=1),
        "maximum": lambda v: v.max(axis=1),
        "minimum": lambda v: v.min(axis=1),
        "abs_max": lambda v: np.abs(v).max(axis=1),
        "abs_min": lambda v: np.abs(v).min(axis=1),
    }[reduce]
    np.testing.assert_allclose(np.asarray(totals)[:, 0], fold(want.astype(np.float64)), rtol=1e-5, atol=1e-5)


def test_activate2_in_bf16_rounds_once() -> None:
    x, c0, c1, alpha = _inputs(4, 32, 3)
    xb = torch.from_numpy(x).to(torch.bfloat16)
    k = _kernel("multiply", "subtract", "copy", False, (False, True), None)
    got = nki.simulate(k)(xb, torch.from_numpy(c0), torch.from_numpy(c1), torch.from_numpy(alpha))
    want = (-0.75 - xb.float() * 1.5).to(torch.bfloat16)
    assert got.dtype == torch.bfloat16
    assert torch.equal(got, want)


def test_activate2_round_trips_through_emitted_nki() -> None:
    x, c0, c1, alpha = _inputs(4, 16, 4)
    k = _kernel("subtract", "bypass", "prelu", True, (True, False), "abs_max")
    source = nki_round_trip(k, x, c0, c1, alpha, target="trn3")
    assert "nisa.activate2(" in source and "op1=nl.bypass" in source and "reverse0=True" in source
    assert "reduce_cmd=nisa.reduce_cmd.reset_reduce" in source and "op=nl.prelu" in source


def _call(target: str = "trn3", **overrides: object) -> None:
    @nki.jit(target=target)
    def k(x):
        out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
        t = nl.load(x)
        kw: dict[str, object] = {"dst": t, "op": nl.exp, "data": t, "imm0": 2.0, "imm1": 1.0}
        kw.update(op0=nl.multiply, op1=nl.add)
        kw.update(overrides)
        nisa.activate2(**kw)
        nl.store(out, value=t)
        return out

    k(np.ones((4, 8), np.float32))


def test_activate2_errors() -> None:
    _call()
    with pytest.raises(TraceError, match=r"\(nl.add, nl.add\) is not a supported pair"):
        _call(op0=nl.add, op1=nl.add)
    with pytest.raises(TraceError, match="op1 requires op0 to be set"):
        _call(op0=nl.bypass, op1=nl.add)
    with pytest.raises(TraceError, match="reverse1=True requires op1 to be set"):
        _call(op1=nl.bypass, reverse1=True)
    with pytest.raises(TraceError, match=r"reduce_op=nl\.multiply is not one of its reductions"):

        @nki.jit(target="trn3")
        def bad_reduce(x):
            out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
            t = nl.load(x)
            res = nl.ndarray((x.shape[0], 1), dtype=nl.float32, buffer=nl.sbuf)
            nisa.activate2(
                dst=t, op=nl.exp, data=t, imm0=1.0, imm1=0.0, op0=nl.multiply, op1=nl.bypass,
                reduce_op=nl.multiply, reduce_res=res, reduce_cmd=nisa.reduce_cmd.reset_reduce,
            )  # fmt: skip
            nl.store(out, value=t)
            return out

        bad_reduce(np.ones((4, 8), np.float32))
    with pytest.raises(ValidationError, match="activate2 needs NeuronCore-v4"):
        _call(target="trn2")
    with pytest.raises(NotImplementedError, match="reduce_cmd"):
        _call(reduce_cmd=nisa.reduce_cmd.reduce)
    with pytest.raises(TypeError):
        _call(op0="multiply")


def test_prelu_is_a_neuroncore_v4_activation_function() -> None:
    @nki.jit(target="trn2")
    def k(x):
        out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
        t = nl.load(x)
        nisa.activation(dst=t, op=nl.prelu, data=t)
        nl.store(out, value=t)
        return out

    with pytest.raises(ValidationError, match=r"nl\.prelu is an activation function of NeuronCore-v4"):
        k(np.ones((4, 8), np.float32))
    x = np.array([[-2.0, 3.0, -0.5, 0.0]], np.float32)
    np.testing.assert_array_equal(np.asarray(nki.jit(k.fn, target="trn3")(x)), np.maximum(x, 0))

"""``nki.language``'s tile-level operations in the frontend (reductions, softmax, matmul,
transpose, creation, Python operators on tiles, ``tile[...] = value``), each lowered to ``nisa``
instructions and checked against NumPy, and their errors."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import torch_nki.nki.isa as nisa
import torch_nki.nki.language as nl
import torch_nki.nki.typing as nt
from torch_nki import nki


def _rand(*shape: int, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).uniform(-1, 1, shape).astype(np.float32)


def _run(body: Callable[[Any], Any], x: np.ndarray, out_shape: tuple[int, ...]) -> np.ndarray:
    """Runs ``body(tile of x)`` in a kernel and returns the tile it gives back, stored."""

    def kernel(a):
        out = nl.ndarray(out_shape, dtype=nl.float32, buffer=nl.shared_hbm)
        result = body(nl.load(a))
        if result.buffer == "psum":
            copy = nl.ndarray(result.shape, dtype=nl.float32, buffer=nl.sbuf)
            nisa.tensor_copy(dst=copy, src=result)
            result = copy
        nl.store(out, value=result)
        return out

    kernel.__name__ = body.__name__
    return np.asarray(nki.simulate(kernel)(x))


@pytest.mark.parametrize(
    ("fn", "ref"),
    [
        (nl.sum, np.sum),
        (nl.max, np.max),
        (nl.min, np.min),
        (nl.prod, np.prod),
        (nl.mean, np.mean),
        (nl.var, np.var),
    ],
)
def test_reductions_over_the_last_free_axes_match_numpy(fn: Any, ref: Any) -> None:
    x = _rand(16, 3, 20) + (1.5 if fn is nl.prod else 0.0)
    rtol = 1e-4 if fn is nl.prod else 1e-5
    # All free axes: one instruction over the whole run per partition.
    got = _run(lambda t: fn(t, axis=(1, 2)), x, (16, 1, 1) if fn is nl.var else (16, 1))
    np.testing.assert_allclose(got.reshape(16), ref(x.astype(np.float64), axis=(1, 2)), rtol=rtol, atol=1e-6)
    # The last axis of a 3-D tile: one reduction per index of the axis kept before it.
    got = _run(lambda t: fn(t, axis=-1), x, (16, 3, 1) if fn is nl.var else (16, 3))
    np.testing.assert_allclose(got.reshape(16, 3), ref(x.astype(np.float64), axis=2), rtol=rtol, atol=1e-6)


def test_keepdims_shapes_and_all() -> None:
    seen: dict[str, tuple[int, ...]] = {}
    x = _rand(8, 4, 6)
    x[2, 1, 3] = 0.0

    def body(t: Any) -> Any:
        seen["sum"] = nl.sum(t, axis=2, keepdims=True).shape
        seen["max"] = nl.max(t, axis=[1, 2]).shape
        seen["var"] = nl.var(t, axis=2).shape
        return nl.all(t, axis=2)

    got = _run(body, x, (8, 4))
    assert seen == {"sum": (8, 4, 1), "max": (8, 1), "var": (8, 4, 1)}
    np.testing.assert_array_equal(got, np.all(x != 0, axis=2).astype(np.float32))


def test_softmax_matches_numpy() -> None:
    x = _rand(32, 2, 50) * 10
    got = _run(lambda t: nl.softmax(t, axis=2), x, (32, 2, 50))
    e = np.exp(x - x.max(axis=2, keepdims=True))
    np.testing.assert_allclose(got, e / e.sum(axis=2, keepdims=True), rtol=1e-5, atol=1e-7)


def test_matmul_and_transpose_run_on_the_tensor_engine() -> None:
    a, b = _rand(64, 96), _rand(96, 128, seed=1)

    def kernel(x, y):
        out = nl.ndarray((64, 128), dtype=nl.float32, buffer=nl.shared_hbm)
        outt = nl.ndarray((96, 64), dtype=nl.float32, buffer=nl.shared_hbm)
        at, bt = nl.load(x), nl.load(y)
        product = nl.matmul(at, bt)
        assert product.buffer == "psum" and product.shape == (64, 128)
        res = nl.ndarray((64, 128), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_copy(dst=res, src=product)
        nl.store(out, value=res)
        tr = nl.transpose(at)
        assert tr.buffer == "psum" and tr.shape == (96, 64)
        trs = nl.ndarray((96, 64), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_copy(dst=trs, src=tr)
        nl.store(outt, value=trs)
        cast = nl.transpose(at, dtype=nl.bfloat16)
        assert cast.buffer == "sbuf" and cast.dtype is nl.bfloat16 and cast.shape == (96, 64)
        return out, outt

    program = nki.trace(kernel, a, b)
    names = [i["inst"] for i in __import__("json").loads(program.to_json())["body"] if "inst" in i]
    assert "nc_transpose" in names and "nc_matmul" in names
    product, transposed = nki.simulate(kernel)(a, b)
    np.testing.assert_allclose(product, a.astype(np.float64) @ b, rtol=1e-5, atol=1e-5)
    np.testing.assert_array_equal(transposed, a.T)

    lhs_t = _rand(96, 64, seed=2)

    def pre_transposed(x, y):
        out = nl.ndarray((64, 128), dtype=nl.float32, buffer=nl.shared_hbm)
        product = nl.matmul(nl.load(x), nl.load(y), transpose_x=True)
        res = nl.ndarray((64, 128), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_copy(dst=res, src=product)
        nl.store(out, value=res)
        return out

    got = nki.simulate(pre_transposed)(lhs_t, b)
    np.testing.assert_allclose(got, lhs_t.T.astype(np.float64) @ b, rtol=1e-5, atol=1e-5)


def test_creation_functions_and_expand_dims() -> None:
    seen: dict[str, Any] = {}

    def body(t: Any) -> Any:
        ones = nl.ones((8, 5), dtype=nl.float32)
        filled = nl.full((8, 5), 2.5, dtype=nl.float32)
        zeros = nl.zeros_like(t)
        empty = nl.empty_like(t, dtype=nl.bfloat16)
        seen["empty"] = (empty.shape, empty.dtype)
        seen["expanded"] = nl.expand_dims(t, 1).shape
        return ones * filled + zeros + t

    x = _rand(8, 5)
    np.testing.assert_allclose(_run(body, x, (8, 5)), 2.5 + x, rtol=1e-6)
    assert seen == {"empty": ((8, 5), nl.bfloat16), "expanded": (8, 1, 5)}


def test_python_operators_on_tiles_are_the_nl_operations() -> None:
    x = _rand(8, 6) + 2.0
    got = _run(lambda t: ((t + t) * 0.5 - 1.0) / t + 2.0 * t - (3.0 - t) + 4.0 / t + (-t), x, (8, 6))
    want = (x + x) * 0.5 - 1.0
    want = want / x + 2.0 * x - (3.0 - x) + 4.0 / x - x
    np.testing.assert_allclose(got, want, rtol=1e-5)
    np.testing.assert_array_equal(_run(lambda t: t > 2.5, x, (8, 6)), (x > 2.5).astype(np.float32))


def test_assigning_into_a_tile_copies_loads_or_fills() -> None:
    x = _rand(8, 6)

    def kernel(a):
        out = nl.ndarray((8, 6), dtype=nl.float32, buffer=nl.shared_hbm)
        t = nl.ndarray((8, 6), dtype=nl.float32, buffer=nl.sbuf)
        t[:, 0:2] = 7.0
        t[:, 2:4] = a[:, 2:4]
        src = nl.load(a[:, 0:2])
        t[:, 4:6] = src
        nl.store(out, value=t)
        return out

    want = x.copy()
    want[:, 0:2] = 7.0
    want[:, 4:6] = x[:, 0:2]
    np.testing.assert_array_equal(nki.simulate(kernel)(x), want)


def test_tile_level_errors_name_the_problem_and_line() -> None:
    def truthy(a):
        t = nl.load(a)
        if nl.equal(t, t):  # truth
            pass
        return a

    with pytest.raises(TypeError, match=r"holds nl\.equal.*no truth value.*test_nki_tile_ops\.py"):
        nki.simulate(truthy)(_rand(4, 4))

    def less(a):
        t = nl.load(a)
        if t < 0.0:  # truth
            pass
        return a

    with pytest.raises(TypeError, match=r"holds nl\.less\(\.\.\.\)"):
        nki.simulate(less)(_rand(4, 4))

    with pytest.raises(ValueError, match=r"nl\.sum: axis 0 of a \(4, 4\) tile must be its last contiguous"):
        _run(lambda t: nl.sum(t, axis=0), _rand(4, 4), (4,))

    with pytest.raises(ValueError, match=r"axis 1 of a \(4, 2, 2\) tile must be its last contiguous"):
        _run(lambda t: nl.sum(t.reshape((4, 2, 2)), axis=1), _rand(4, 4), (4, 2))

    kept = r"tensor_reduce: axis=2 of a \(4, 2, 2\) data tile keeps 2 element\(s\) per partition, but dst"
    with pytest.raises(ValueError, match=kept):

        def partial(t: Any) -> Any:
            res = nl.ndarray((4, 1), dtype=nl.float32, buffer=nl.sbuf)
            nisa.tensor_reduce(dst=res, op=nl.add, data=t.reshape((4, 2, 2)), axis=2)
            return res

        _run(partial, _rand(4, 4), (4, 1))

    with pytest.raises(ValueError, match="contraction dimensions differ"):
        _run(lambda t: nl.matmul(t, t[0:3, :], transpose_x=True), _rand(4, 5), (5, 5))


def test_nki_objects_no_reorder_and_typing() -> None:
    class Config(nl.NKIObject):
        pass

    cfg = Config(tile=128, dtype=nl.bfloat16)
    assert cfg.tile == 128 and cfg.dtype is nl.bfloat16  # type: ignore[attr-defined]
    assert repr(nt.tensor[(128, 512), nl.float32]) == "nt.tensor[(128, 512), nl.float32]"
    assert nt.float8_e4m3 is nl.float8_e4m3  # type: ignore[attr-defined]

    def ordered(t: Any) -> Any:
        with nl.no_reorder():
            return t + 1.0

    x = _rand(4, 4)
    np.testing.assert_allclose(_run(ordered, x, (4, 4)), x + 1.0)


def test_a_tile_is_true_as_any_object_is() -> None:
    """NKI's NkiTensor defines no truth value: ``if tile:`` means "is not None"."""

    def maybe_scaled(a, scale=None):
        out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
        t = nl.load(a)
        s = nl.load(scale) if scale is not None else None
        if s:
            t = nl.multiply(t, s)
        nl.store(out, value=t)
        return out

    x, y = _rand(4, 4), _rand(4, 4)
    np.testing.assert_allclose(nki.simulate(maybe_scaled)(x, y), x * y, rtol=1e-6)
    np.testing.assert_array_equal(nki.simulate(maybe_scaled)(x), x)

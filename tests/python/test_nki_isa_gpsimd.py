"""The frontend arms of ``select_reduce``, ``tensor_scalar_cumulative``, ``sequence_bounds``,
``nonzero_with_count`` and ``topk``: each runs through ``nisa.<name>(...)`` against NumPy, emits
NKI source that traces back to the same program, and its bad inputs and unimplemented keywords
raise errors naming the call."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
import torch

import torch_nki.nki.isa as nisa
import torch_nki.nki.language as nl
from torch_nki import nki
from torch_nki.errors import TraceError, ValidationError

from refs import nki_round_trip


def _rand(*shape: int, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).uniform(-1, 1, shape).astype(np.float32)


@nki.jit
def selected(x, pred, floor):
    """``select_reduce`` of ``x`` by the int8 ``pred``: ``-1e30`` elsewhere with each row's
    maximum, and the per-row ``floor`` where ``pred`` is nonzero (``reverse_pred``)."""
    p, n = x.shape
    out = nl.ndarray((p, 2 * n + 1), dtype=nl.float32, buffer=nl.shared_hbm)
    tx, tp, tf = nl.load(x), nl.load(pred), nl.load(floor)
    dst = nl.ndarray((p, 2 * n + 1), dtype=nl.float32, buffer=nl.sbuf)
    nisa.select_reduce(
        dst=dst[:, 0:n],
        predicate=tp,
        on_true=tx,
        on_false=-1e30,
        reduce_res=dst[:, 2 * n : 2 * n + 1],
        reduce_cmd=nisa.reduce_cmd.reset_reduce,
        reduce_op=nl.maximum,
    )
    nisa.select_reduce(dst=dst[:, n : 2 * n], predicate=tp, on_true=tx, on_false=tf, reverse_pred=True)
    nl.store(out, value=dst)
    return out


def test_select_reduce_matches_numpy_where_and_max() -> None:
    p, n = 64, 50
    x, floor = _rand(p, n), _rand(p, 1, seed=1)
    pred = np.random.default_rng(2).integers(0, 3, (p, n)).astype(np.int8)
    got = nki.simulate(selected)(x, pred, floor)
    where = np.where(pred != 0, x, np.float32(-1e30))
    np.testing.assert_array_equal(got[:, 0:n], where)
    np.testing.assert_array_equal(got[:, n : 2 * n], np.where(pred == 0, x, floor))
    np.testing.assert_array_equal(got[:, 2 * n :], where.max(axis=1, keepdims=True))


def test_select_reduce_emits_and_traces_back() -> None:
    pred = np.ones((8, 4), dtype=np.int8)
    source = nki_round_trip(selected, _rand(8, 4), pred, _rand(8, 1))
    assert "reduce_cmd=nisa.reduce_cmd.reset_reduce, reduce_op=nl.maximum" in source
    assert "reverse_pred=True" in source


def _select(x: np.ndarray, pred: np.ndarray, **kw: Any) -> Any:
    @nki.jit
    def k(x, pred):
        out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
        tx, tp = nl.load(x), nl.load(pred)
        res = nl.ndarray((x.shape[0], 1), dtype=nl.float32, buffer=nl.sbuf)
        args = {"reduce_res": res, **kw} if "reduce_cmd" in kw else kw
        nisa.select_reduce(dst=tx, predicate=tp, on_true=tx, on_false=0.0, **args)
        nl.store(out, value=tx)
        return out

    return nki.simulate(k)(x, pred)


def test_select_reduce_errors_name_the_call() -> None:
    x, pred = _rand(8, 16), np.ones((8, 16), dtype=np.int8)
    with pytest.raises(
        ValidationError, match=r"select_reduce: predicate \S+ must be int8, uint8, int16 or uint16"
    ):
        _select(x, x)
    with pytest.raises(ValueError, match=r"reduce_op must be nl.maximum .* got nl.add"):
        _select(x, pred, reduce_cmd=nisa.reduce_cmd.reset_reduce, reduce_op=nl.add)
    with pytest.raises(NotImplementedError, match=r"reduce_cmd=nisa.reduce_cmd.reduce with reduce_res"):
        _select(x, pred, reduce_cmd=nisa.reduce_cmd.reduce)
    with pytest.raises(NotImplementedError, match=r"reduce_cmd=nisa.reduce_cmd.reset_reduce without"):
        _select_no_res(x, pred)
    with pytest.raises(TraceError, match=r"select_reduce: predicate has shape \[8, 8\] but on_true"):
        _select(x, pred[:, 0:8])


def _select_no_res(x: np.ndarray, pred: np.ndarray) -> Any:
    @nki.jit
    def k(x, pred):
        out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
        tx, tp = nl.load(x), nl.load(pred)
        nisa.select_reduce(
            dst=tx, predicate=tp, on_true=tx, on_false=0.0, reduce_cmd=nisa.reduce_cmd.reset_reduce
        )
        nl.store(out, value=tx)
        return out

    return nki.simulate(k)(x, pred)


@nki.jit
def running(x, start):
    """Prefix sums of ``2·x`` (``reset_reduce``), running maxima of ``x`` from the per-row
    ``start`` (``load_reduce``) and a running product of ``x + 1`` from 1."""
    p, n = x.shape
    out = nl.ndarray((p, 3 * n), dtype=x.dtype, buffer=nl.shared_hbm)
    tx, ts = nl.load(x), nl.load(start)
    dst = nl.ndarray((p, 3 * n), dtype=x.dtype, buffer=nl.sbuf)
    nisa.tensor_scalar_cumulative(dst=dst[:, 0:n], src=tx, op0=nl.multiply, op1=nl.add, imm0=2.0)
    nisa.tensor_scalar_cumulative(
        dst=dst[:, n : 2 * n],
        src=tx,
        op0=nl.add,
        op1=nl.maximum,
        imm0=0.0,
        imm1=ts,
        reduce_cmd=nisa.reduce_cmd.load_reduce,
    )
    nisa.tensor_scalar_cumulative(dst=dst[:, 2 * n :], src=tx, op0=nl.add, op1=nl.multiply, imm0=1.0)
    nl.store(out, value=dst)
    return out


def _accumulate(values: np.ndarray, step: Any, start: np.ndarray, to: Any) -> np.ndarray:
    """The docs' pseudocode per row: the accumulator in fp32, each element converted on write."""
    out = np.empty(values.shape, dtype=np.float32)
    acc = start.astype(np.float32).copy()
    for i in range(values.shape[1]):
        acc = step(values[:, i], acc).astype(np.float32)
        out[:, i] = to(acc)
    return out


def test_tensor_scalar_cumulative_matches_the_docs_pseudocode() -> None:
    p, n = 32, 40
    x, start = _rand(p, n) * 0.5, _rand(p, 1, seed=3)
    got = nki.simulate(running)(x, start)
    keep = np.asarray
    zero, one = np.zeros(p, np.float32), np.ones(p, np.float32)
    np.testing.assert_array_equal(got[:, 0:n], _accumulate(x * 2, np.add, zero, keep))
    maxima = np.maximum.accumulate(np.hstack([start, x]), axis=1)[:, 1:]
    np.testing.assert_array_equal(got[:, n : 2 * n], maxima)
    np.testing.assert_array_equal(got[:, 2 * n :], _accumulate(x + 1, np.multiply, one, keep))
    xb = torch.from_numpy(x).to(torch.bfloat16)
    got_b = running(xb, torch.from_numpy(start))

    def to_bf16(v: np.ndarray) -> np.ndarray:
        return torch.from_numpy(v).to(torch.bfloat16).float().numpy()

    sums = _accumulate(xb.float().numpy() * 2, np.add, zero, to_bf16)
    np.testing.assert_array_equal(got_b[:, 0:n].float().numpy(), sums)


def test_tensor_scalar_cumulative_emits_and_traces_back() -> None:
    source = nki_round_trip(running, _rand(8, 6), _rand(8, 1))
    assert "op1=nl.maximum, imm0=0.0, imm1=t1, reduce_cmd=nisa.reduce_cmd.load_reduce)" in source


def test_tensor_scalar_cumulative_errors_name_the_call() -> None:
    x = _rand(8, 16)

    def one(body: Any) -> Any:
        @nki.jit
        def k(x):
            out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
            t = nl.load(x)
            body(t)
            nl.store(out, value=t)
            return out

        return nki.simulate(k)(x)

    def call(t: Any, **kw: Any) -> None:
        args = {"op0": nl.add, "op1": nl.add, "imm0": 0.0, **kw}
        nisa.tensor_scalar_cumulative(dst=t, src=t, **args)

    with pytest.raises(ValueError, match="load_reduce needs imm1"):
        one(lambda t: call(t, reduce_cmd=nisa.reduce_cmd.load_reduce))
    with pytest.raises(ValueError, match=r"imm1 is only read with reduce_cmd=nisa\.reduce_cmd\.load_reduce"):
        one(lambda t: call(t, imm1=1.0))
    with pytest.raises(NotImplementedError, match=r"reduce_cmd=nisa.reduce_cmd.reduce"):
        one(lambda t: call(t, reduce_cmd=nisa.reduce_cmd.reduce))
    with pytest.raises(TraceError, match="op1 must be add, subtract, multiply, maximum or minimum"):
        one(lambda t: call(t, op1=nl.divide))
    with pytest.raises(TraceError, match="op0 must be an arithmetic operator"):
        one(lambda t: call(t, op0=nl.greater))

    @nki.jit
    def int32_src(x):
        out = nl.ndarray(x.shape, dtype=nl.float32, buffer=nl.shared_hbm)
        t = nl.load(x)
        d = nl.ndarray(x.shape, dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_scalar_cumulative(dst=d, src=t, op0=nl.add, op1=nl.add, imm0=0.0)
        nl.store(out, value=d)
        return out

    with pytest.raises(ValidationError, match=r"tensor_scalar_cumulative: src .* got i32"):
        nki.simulate(int32_src)(np.ones((4, 4), dtype=np.int32))


@nki.jit
def bounds(ids):
    """``sequence_bounds`` of a ``(1, N)`` tile of segment ids into ``(1, 2, N)``."""
    _, n = ids.shape
    out = nl.ndarray((1, 2, n), dtype=ids.dtype, buffer=nl.shared_hbm)
    t = nl.load(ids)
    dst = nl.ndarray((1, 2, n), dtype=ids.dtype, buffer=nl.sbuf)
    nisa.sequence_bounds(dst=dst, segment_ids=t)
    nl.store(out, value=dst)
    return out


def _bounds_reference(ids: np.ndarray) -> np.ndarray:
    """Each element's run ``[start, end)``; id 0 gets ``(n, -1)``."""
    n = len(ids)
    lo, hi = np.zeros(n), np.zeros(n)
    for i in range(n):
        lo[i] = n if ids[i] == 0 else (lo[i - 1] if i > 0 and ids[i] == ids[i - 1] else i)
    for i in reversed(range(n)):
        hi[i] = -1 if ids[i] == 0 else (hi[i + 1] if i + 1 < n and ids[i] == ids[i + 1] else i + 1)
    return np.stack([lo, hi])[None].astype(ids.dtype)


def test_sequence_bounds_matches_the_docs_reference() -> None:
    ids = np.array([[0, 1, 1, 2, 2, 2, 0, 3, 3]], dtype=np.int32)
    got = nki.simulate(bounds)(ids)
    want = [[[9, 1, 1, 3, 3, 3, 9, 7, 7], [-1, 3, 3, 6, 6, 6, -1, 9, 9]]]
    np.testing.assert_array_equal(got, np.array(want, dtype=np.int32))
    ids = np.sort(np.random.default_rng(0).integers(0, 32, 32)).astype(np.float32)[None]
    np.testing.assert_array_equal(nki.simulate(bounds)(ids), _bounds_reference(ids[0]))


def test_sequence_bounds_emits_and_traces_back_and_checks_its_operands() -> None:
    source = nki_round_trip(bounds, np.ones((1, 8), dtype=np.float32))
    assert "nisa.sequence_bounds(dst=t1, segment_ids=t0)" in source
    with pytest.raises(ValidationError, match=r"segment_ids .* must be float32 or int32, got bf16"):
        bounds(torch.ones(1, 8, dtype=torch.bfloat16))
    with pytest.raises(ValidationError, match="segment_ids must be one partition"):

        @nki.jit
        def two(ids):
            out = nl.ndarray((2, 16), dtype=ids.dtype, buffer=nl.shared_hbm)
            t = nl.load(ids)
            dst = nl.ndarray((2, 16), dtype=ids.dtype, buffer=nl.sbuf)
            nisa.sequence_bounds(dst=dst, segment_ids=t)
            nl.store(out, value=dst)
            return out

        nki.simulate(two)(np.ones((2, 8), dtype=np.float32))


def _nonzeros_on(target: str) -> Any:
    @nki.jit(target=target)
    def nonzeros(x):
        """``nonzero_with_count`` of ``x`` with offset 16 into an int32 tile first set to 5."""
        p, n = x.shape
        out = nl.ndarray((p, n + 1), dtype=nl.int32, buffer=nl.shared_hbm)
        t = nl.load(x)
        dst = nl.ndarray((p, n + 1), dtype=nl.int32, buffer=nl.sbuf)
        nisa.memset(dst=dst, value=5)
        nisa.nonzero_with_count(dst=dst, src=t, index_offset=16, padding_val=-1)
        nl.store(out, value=dst)
        return out

    return nonzeros


nonzeros = _nonzeros_on("trn2")


def test_nonzero_with_count_fills_every_16th_partition() -> None:
    x = (np.random.default_rng(1).uniform(0, 1, (128, 30)) > 0.6).astype(np.float32)
    got = nki.simulate(nonzeros)(x)
    for p in range(128):
        if p % 16:
            assert (got[p] == 5).all(), p
            continue
        found = np.nonzero(x[p])[0] + 16
        want = np.full(31, -1, dtype=np.int32)
        want[: len(found)] = found
        want[30] = len(found)
        np.testing.assert_array_equal(got[p], want)
    # The docs' example row.
    row = np.array([[0, 1, 1, 0, 0, 1, 0, 0]], dtype=np.int32)
    np.testing.assert_array_equal(nki.simulate(nonzeros)(row), [[17, 18, 21, -1, -1, -1, -1, -1, 3]])


def test_nonzero_with_count_emits_and_traces_back_and_checks_its_operands() -> None:
    source = nki_round_trip(nonzeros, np.ones((16, 4), dtype=np.float32))
    assert "nisa.nonzero_with_count(dst=t1, src=t0, index_offset=16, padding_val=-1)" in source
    with pytest.raises(ValidationError, match="nonzero_with_count needs NeuronCore-v3"):
        nki.simulate(_nonzeros_on("trn1"))(np.ones((16, 4), dtype=np.float32))
    with pytest.raises(TypeError, match=r"index_offset must be an int, got 0\.5"):

        @nki.jit
        def bad(x):
            out = nl.ndarray((16, 5), dtype=nl.int32, buffer=nl.shared_hbm)
            t = nl.load(x)
            dst = nl.ndarray((16, 5), dtype=nl.int32, buffer=nl.sbuf)
            nisa.nonzero_with_count(dst=dst, src=t, index_offset=0.5)
            nl.store(out, value=dst)
            return out

        nki.simulate(bad)(np.ones((16, 4), dtype=np.float32))


def _snake_topk(x: np.ndarray, n: int, k: int) -> tuple[np.ndarray, np.ndarray]:
    """Per group of 16 partitions, the ``k`` largest of the ``n``-element snake (ties to the
    lower index), ascending, laid out as a snake over ``[16, k]``; other slots 0."""
    p = x.shape[0]
    vals, idxs = np.zeros((p, k), np.float32), np.zeros((p, k), np.int64)
    for g in range(p // 16):
        snake = [(float(x[16 * g + e % 16, e // 16]), e) for e in range(n)]
        top = sorted(snake, key=lambda t: (-t[0], t[1]))[:k]
        for j, (v, e) in enumerate(sorted(top, key=lambda t: (t[0], t[1]))):
            vals[16 * g + j % 16, j // 16], idxs[16 * g + j % 16, j // 16] = v, e
    return vals, idxs


@nki.jit
def snake_topk(x, n: int, k: int):
    """``topk`` of the snakes of ``x`` (bf16), outputs first zeroed."""
    p, _ = x.shape
    vals = nl.ndarray((p, k), dtype=nl.bfloat16, buffer=nl.shared_hbm)
    idxs = nl.ndarray((p, k), dtype=nl.uint32, buffer=nl.shared_hbm)
    src = nl.load(x)
    v = nl.ndarray((p, k), dtype=nl.bfloat16, buffer=nl.sbuf)
    i = nl.ndarray((p, k), dtype=nl.uint32, buffer=nl.sbuf)
    nisa.memset(dst=v, value=0.0)
    nisa.memset(dst=i, value=0)
    nisa.topk(val_dst=v, idx_dst=i, src=src, n=n)
    nl.store(vals, value=v)
    nl.store(idxs, value=i)
    return vals, idxs


def test_topk_matches_a_sort_of_each_snake() -> None:
    for (p, cols), n, k in [((16, 3), 42, 8), ((64, 20), 300, 40)]:
        x = torch.from_numpy(_rand(p, cols, seed=n)).to(torch.bfloat16)
        vals, idxs = snake_topk(x, n, k)
        want_v, want_i = _snake_topk(x.float().numpy(), n, k)
        np.testing.assert_array_equal(vals.float().numpy(), want_v)
        np.testing.assert_array_equal(idxs.to(torch.int64).numpy(), want_i)


def test_topk_emits_and_traces_back_and_checks_its_limits() -> None:
    x = torch.ones(16, 3, dtype=torch.bfloat16)
    source = nki_round_trip(snake_topk, x, 42, 8)
    assert "nisa.topk(val_dst=t1, idx_dst=t2, src=t0, n=42)" in source
    with pytest.raises(ValidationError, match=r"topk: n is 4; the limit is 8 <= n < 65536"):
        snake_topk(x, 4, 2)
    with pytest.raises(ValidationError, match="a snake of n = 60 needs 4"):
        snake_topk(x, 60, 8)
    with pytest.raises(ValidationError, match=r"topk: src .* must be bfloat16, got f32"):
        snake_topk(torch.ones(16, 3), 42, 8)
    with pytest.raises(ValueError, match="n is the number of elements in the snake, got -3"):
        snake_topk(x, -3, 8)

"""The frontend arms of the vector-engine instructions added after the first set: each runs
through ``nisa.<name>(...)`` against NumPy / torch, emits NKI source that traces back to the same
program, and its operand errors and unimplemented keywords name the call."""

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
def reciprocal_kernel(x):
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    t = nl.load(x)
    r = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.sbuf)
    nisa.reciprocal(dst=r, data=t)
    nl.store(out, value=r)
    return out


def test_reciprocal_matches_numpy_with_its_special_values() -> None:
    x = _rand(96, 70) * 5
    x[0, :6] = [0.0, -0.0, np.inf, -np.inf, np.nan, 3.0]
    got = nki.simulate(reciprocal_kernel)(x)
    with np.errstate(divide="ignore"):
        want = np.float32(1.0) / x
    np.testing.assert_array_equal(got, want)
    assert np.signbit(got[0, 3]) and got[0, 1] == -np.inf


def test_reciprocal_rounds_the_fp32_result_to_bf16() -> None:
    x = torch.rand(64, 33, dtype=torch.bfloat16) + 0.5
    got = reciprocal_kernel(x)
    assert got.dtype == torch.bfloat16
    torch.testing.assert_close(got, (1.0 / x.float()).to(torch.bfloat16), rtol=0, atol=0)


def test_reciprocal_emits_and_traces_back() -> None:
    source = nki_round_trip(reciprocal_kernel, _rand(8, 16))
    assert "nisa.reciprocal(dst=t1, data=t0)" in source


def test_reciprocal_shape_mismatch_is_a_trace_error_naming_it() -> None:
    @nki.jit
    def bad(x):
        out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
        t = nl.load(x)
        r = nl.ndarray((8, 4), dtype=x.dtype, buffer=nl.sbuf)
        nisa.reciprocal(dst=r, data=t)
        nl.store(out, value=t)
        return out

    with pytest.raises(TraceError, match=r"reciprocal: data has shape \[8, 16\] but dst has shape \[8, 4\]"):
        nki.simulate(bad)(_rand(8, 16))


@nki.jit(target="trn3")
def softmax_parts(x):
    """``exp(x - max)`` and its row sums through ``nisa.exponential``, the max from
    ``tensor_reduce``; also the same from a load_reduce of 1.0 and an immediate max_value."""
    p, n = x.shape
    e_out = nl.ndarray((p, n), dtype=x.dtype, buffer=nl.shared_hbm)
    sums = nl.ndarray((p, 2), dtype=nl.float32, buffer=nl.shared_hbm)
    t = nl.load(x)
    m = nl.ndarray((p, 1), dtype=nl.float32, buffer=nl.sbuf)
    nisa.tensor_reduce(dst=m, op=nl.maximum, data=t, axis=1)
    e = nl.ndarray((p, n), dtype=x.dtype, buffer=nl.sbuf)
    s = nl.ndarray((p, 2), dtype=nl.float32, buffer=nl.sbuf)
    nisa.exponential(dst=e, src=t, max_value=m, reduce_res=s[:, 0:1], reduce_cmd=nisa.reduce_cmd.reset_reduce)
    e2 = nl.ndarray((p, n), dtype=nl.float32, buffer=nl.sbuf)
    nisa.exponential(
        dst=e2,
        src=t,
        max_value=1.0,
        reduce_res=s[:, 1:2],
        reduce_cmd=nisa.reduce_cmd.load_reduce,
        reduce_init=1.0,
    )
    nl.store(e_out, value=e)
    nl.store(sums, value=s)
    return e_out, sums


def test_exponential_matches_numpy_with_fp32_row_sums() -> None:
    x = _rand(100, 300) * 10
    e, sums = nki.simulate(softmax_parts)(x)
    m = x.max(axis=1, keepdims=True)
    want = np.exp((x - m).astype(np.float64))
    np.testing.assert_allclose(e, want, rtol=3e-6, atol=0)
    np.testing.assert_allclose(sums[:, 0], want.sum(axis=1), rtol=1e-5)
    np.testing.assert_allclose(sums[:, 1], 1.0 + np.exp(x.astype(np.float64) - 1.0).sum(axis=1), rtol=1e-5)


def test_exponential_in_bf16_sums_before_rounding() -> None:
    x = (torch.rand(32, 64) * 4).to(torch.bfloat16)
    e, sums = softmax_parts(x)
    assert e.dtype == torch.bfloat16
    xf = x.float()
    want = torch.exp(xf - xf.max(dim=1, keepdim=True).values)
    torch.testing.assert_close(e, want.to(torch.bfloat16), rtol=1e-2, atol=0)
    torch.testing.assert_close(sums[:, 0], want.sum(dim=1), rtol=1e-5, atol=0)


def test_exponential_emits_and_traces_back_and_needs_trn3() -> None:
    source = nki_round_trip(softmax_parts, _rand(8, 16), target="trn3")
    assert (
        "nisa.exponential(dst=t2, src=t0, max_value=t1, reduce_res=t3[0:8, 0:1], "
        "reduce_cmd=nisa.reduce_cmd.reset_reduce)"
    ) in source
    assert "reduce_cmd=nisa.reduce_cmd.load_reduce, reduce_init=1.0)" in source
    with pytest.raises(ValidationError, match=r"exponential needs NeuronCore-v4 \(Trn3\) or newer"):
        nki.simulate(nki.jit(softmax_parts.fn, target="trn2"))(_rand(8, 16))


def _one(body: Any, target: str = "trn3") -> Any:
    @nki.jit(target=target)
    def k(x):
        out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
        t = nl.load(x)
        body(t)
        nl.store(out, value=t)
        return out

    return nki.simulate(k)


def test_exponential_keywords_it_does_not_implement_name_themselves() -> None:
    x = _rand(8, 16)

    def res() -> Any:
        return nl.ndarray((8, 1), dtype=nl.float32, buffer=nl.sbuf)

    with pytest.raises(
        NotImplementedError, match=r"nisa\.exponential\(reduce_cmd=nisa\.reduce_cmd\.reduce with"
    ):
        _one(lambda t: nisa.exponential(dst=t, src=t, reduce_res=res(), reduce_cmd=nisa.reduce_cmd.reduce))(x)
    # Without reduce_res the accumulator would be left for a later instruction.
    with pytest.raises(NotImplementedError, match=r"reduce_cmd=nisa\.reduce_cmd\.reset_reduce"):
        _one(lambda t: nisa.exponential(dst=t, src=t, reduce_cmd=nisa.reduce_cmd.reset_reduce))(x)
    # NKI's default reduce_cmd (idle) writes no reduce_res.
    with pytest.raises(NotImplementedError, match=r"reduce_cmd=nisa\.reduce_cmd\.idle with reduce_res"):
        _one(lambda t: nisa.exponential(dst=t, src=t, reduce_res=res()))(x)
    with pytest.raises(ValueError, match=r"reduce_init must be 0\.0 unless reduce_cmd is"):
        _one(
            lambda t: nisa.exponential(
                dst=t, src=t, reduce_res=res(), reduce_cmd=nisa.reduce_cmd.reset_reduce, reduce_init=2.0
            )
        )(x)
    with pytest.raises(TraceError, match=r"exponential: max_value must be a \(8, 1\) column"):
        _one(lambda t: nisa.exponential(dst=t, src=t, max_value=t))(x)


@nki.jit
def scaled_row_stats(x, c):
    """``x · c`` (a per-row column) with its row sums, its negated row maxima, and the row
    minima on top of 0.5 (``load_reduce``), through ``nisa.tensor_scalar_reduce``."""
    p, n = x.shape
    scaled = nl.ndarray((p, n), dtype=x.dtype, buffer=nl.shared_hbm)
    stats = nl.ndarray((p, 3), dtype=nl.float32, buffer=nl.shared_hbm)
    t, col = nl.load(x), nl.load(c)
    y = nl.ndarray((p, n), dtype=x.dtype, buffer=nl.sbuf)
    s = nl.ndarray((p, 3), dtype=nl.float32, buffer=nl.sbuf)
    nisa.tensor_scalar_reduce(
        dst=y, data=t, op0=nl.multiply, operand0=col, reduce_op=nl.add, reduce_res=s[:, 0:1]
    )
    nisa.tensor_scalar_reduce(
        dst=y,
        data=t,
        op0=nl.multiply,
        operand0=col,
        reduce_op=nl.maximum,
        reduce_res=s[:, 1:2],
        reduce_res_negate=True,
    )
    nisa.tensor_scalar_reduce(
        dst=y,
        data=t,
        op0=nl.multiply,
        operand0=col,
        reduce_op=nl.minimum,
        reduce_res=s[:, 2:3],
        reduce_cmd=nisa.reduce_cmd.load_reduce,
        reduce_init=0.5,
    )
    nl.store(scaled, value=y)
    nl.store(stats, value=s)
    return scaled, stats


def test_tensor_scalar_reduce_matches_numpy() -> None:
    x, c = _rand(70, 90), _rand(70, 1, seed=1) * 3
    scaled, stats = nki.simulate(scaled_row_stats)(x, c)
    y = x * c
    np.testing.assert_array_equal(scaled, y)
    np.testing.assert_allclose(stats[:, 0], y.astype(np.float64).sum(axis=1), rtol=1e-5, atol=1e-5)
    np.testing.assert_array_equal(stats[:, 1], -y.max(axis=1))
    np.testing.assert_array_equal(stats[:, 2], np.minimum(0.5, y.min(axis=1)))


def test_tensor_scalar_reduce_reduces_the_fp32_results_of_bf16_data() -> None:
    x = torch.rand(16, 40, dtype=torch.bfloat16)
    c = torch.full((16, 1), 1.0 / 3.0)
    scaled, stats = scaled_row_stats(x, c)
    y = x.float() * c
    torch.testing.assert_close(scaled, y.to(torch.bfloat16), rtol=0, atol=0)
    torch.testing.assert_close(stats[:, 0], y.sum(dim=1), rtol=1e-5, atol=0)
    torch.testing.assert_close(stats[:, 1], -y.max(dim=1).values, rtol=0, atol=0)


def test_tensor_scalar_reduce_emits_and_traces_back() -> None:
    source = nki_round_trip(scaled_row_stats, _rand(8, 16), _rand(8, 1))
    assert (
        "nisa.tensor_scalar_reduce(dst=t2, data=t0, op0=nl.multiply, operand0=t1, reduce_op=nl.add, "
        "reduce_res=t3[0:8, 0:1])"
    ) in source
    assert "reduce_res=t3[0:8, 1:2], reduce_res_negate=True)" in source
    assert "reduce_cmd=nisa.reduce_cmd.load_reduce, reduce_init=0.5)" in source


def test_tensor_scalar_reduce_keywords_it_does_not_implement_name_themselves() -> None:
    x = _rand(8, 16)

    def res() -> Any:
        return nl.ndarray((8, 1), dtype=nl.float32, buffer=nl.sbuf)

    def tsr(t: Any, **kwargs: Any) -> None:
        nisa.tensor_scalar_reduce(dst=t, data=t, op0=nl.add, operand0=1.0, reduce_op=nl.add, **kwargs)

    with pytest.raises(NotImplementedError, match=r"nisa\.tensor_scalar_reduce\(reduce_res=None"):
        _one(lambda t: tsr(t), target="trn2")(x)
    with pytest.raises(NotImplementedError, match=r"reduce_cmd=nisa\.reduce_cmd\.reduce \(the accumulator"):
        _one(lambda t: tsr(t, reduce_res=res(), reduce_cmd=nisa.reduce_cmd.reduce), target="trn2")(x)
    with pytest.raises(ValueError, match="load_reduce needs reduce_init"):
        _one(lambda t: tsr(t, reduce_res=res(), reduce_cmd=nisa.reduce_cmd.load_reduce), target="trn2")(x)
    with pytest.raises(ValueError, match="reduce_init is only set with"):
        _one(lambda t: tsr(t, reduce_res=res(), reduce_init=1.0), target="trn2")(x)
    with pytest.raises(TraceError, match="tensor_scalar_reduce: Subtract is not a reduction operator"):
        _one(
            lambda t: nisa.tensor_scalar_reduce(
                dst=t, data=t, op0=nl.add, operand0=1.0, reduce_op=nl.subtract, reduce_res=res()
            ),
            target="trn2",
        )(x)


@nki.jit
def top_k(x, k):
    """The ``k`` (a multiple of 8) largest values of each row and their indices, eight per round:
    ``max8``, then ``nc_match_replace8`` replacing them by ``-inf`` in place and writing where
    they were; ``nc_find_index8`` of the first eight in the original row as well."""
    p, n = x.shape
    values = nl.ndarray((p, k), dtype=x.dtype, buffer=nl.shared_hbm)
    indices = nl.ndarray((p, k), dtype=nl.int32, buffer=nl.shared_hbm)
    first = nl.ndarray((p, 8), dtype=nl.int32, buffer=nl.shared_hbm)
    t = nl.load(x)
    work = nl.ndarray((p, n), dtype=x.dtype, buffer=nl.sbuf)
    nisa.tensor_copy(dst=work, src=t)
    v = nl.ndarray((p, k), dtype=x.dtype, buffer=nl.sbuf)
    i = nl.ndarray((p, k), dtype=nl.int32, buffer=nl.sbuf)
    for r in range(k // 8):
        nisa.max8(dst=v[:, r * 8 : r * 8 + 8], src=work)
        nisa.nc_match_replace8(
            dst=work,
            data=work,
            vals=v[:, r * 8 : r * 8 + 8],
            imm=float("-inf"),
            dst_idx=i[:, r * 8 : r * 8 + 8],
        )
    f = nl.ndarray((p, 8), dtype=nl.int32, buffer=nl.sbuf)
    nisa.nc_find_index8(dst=f, data=t, vals=v[:, 0:8])
    nl.store(values, value=v)
    nl.store(indices, value=i)
    nl.store(first, value=f)
    return values, indices, first


def test_top_k_from_max8_and_match_replace8_matches_torch_topk() -> None:
    x = torch.randn(100, 700)
    values, indices, first = top_k(x, 24)
    want = torch.topk(x, 24, dim=1)
    torch.testing.assert_close(values, want.values, rtol=0, atol=0)
    torch.testing.assert_close(indices.long(), want.indices, rtol=0, atol=0)
    torch.testing.assert_close(first.long(), want.indices[:, :8], rtol=0, atol=0)


def test_top_k_in_bf16_with_ties_gets_distinct_indices_holding_their_values() -> None:
    x = torch.randint(0, 6, (16, 64)).to(torch.bfloat16)
    values, indices, first = top_k(x, 16)
    torch.testing.assert_close(values, torch.topk(x.float(), 16, dim=1).values.to(torch.bfloat16))
    for row, idx, vals, f in zip(x, indices.long(), values, first.long(), strict=True):
        assert len(set(idx.tolist())) == 16
        torch.testing.assert_close(row[idx], vals, rtol=0, atol=0)
        # find_index8 pairs repeated values with their occurrences in ascending order,
        # match_replace8 in descending order.
        torch.testing.assert_close(row[f], vals[:8], rtol=0, atol=0)
        ties = (vals[:8] == vals[0]).nonzero().flatten()
        if len(ties) > 1:
            assert f[ties].tolist() == sorted(f[ties].tolist())
            assert idx[ties].tolist() == sorted(idx[ties].tolist(), reverse=True)


def test_selection_emits_and_traces_back() -> None:
    source = nki_round_trip(top_k, _rand(8, 32), 16)
    assert "nisa.max8(dst=t2[0:8, 8:16], src=t1)" in source
    assert (
        "nisa.nc_match_replace8(dst=t1, data=t1, vals=t2[0:8, 0:8], imm=float('-inf'), dst_idx=t3[0:8, 0:8])"
    ) in source
    assert "nisa.nc_find_index8(dst=t4, data=t0, vals=t2[0:8, 0:8])" in source


def test_selection_operand_errors_name_the_instruction() -> None:
    x = _rand(8, 16)

    def tile(*shape: int, dtype: Any = nl.float32) -> Any:
        return nl.ndarray(shape, dtype=dtype, buffer=nl.sbuf)

    with pytest.raises(TraceError, match=r"max8: dst must be \(8, 8\)"):
        _one(lambda t: nisa.max8(dst=tile(8, 4), src=t), target="trn2")(x)
    with pytest.raises(TraceError, match="max8: src has 4 elements per partition"):
        _one(lambda t: nisa.max8(dst=tile(8, 8), src=t[:, 0:4]), target="trn2")(x)
    with pytest.raises(TraceError, match="nc_find_index8: dst must be a uint32 tile"):
        _one(lambda t: nisa.nc_find_index8(dst=tile(8, 8), data=t, vals=t[:, 0:8]), target="trn2")(x)
    with pytest.raises(TraceError, match="nc_match_replace8: dst_idx must be a uint32 tile"):
        _one(
            lambda t: nisa.nc_match_replace8(dst=t, data=t, vals=t[:, 0:8], imm=0.0, dst_idx=tile(8, 8)),
            target="trn2",
        )(x)


@nki.jit
def clamp_negatives(x, y):
    """``y`` where ``x <= 0`` and ``x`` elsewhere, then 0.25 where ``x > 0.5``, through
    ``nisa.tensor_copy_predicated`` with a tile and an immediate ``src``."""
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    tx, dst = nl.load(x), nl.load(y)
    positive = nl.ndarray(x.shape, dtype=nl.float32, buffer=nl.sbuf)
    nisa.tensor_scalar(dst=positive, data=tx, op0=nl.greater, operand0=0.0)
    nisa.tensor_copy_predicated(dst=dst, src=tx, predicate=positive)
    small = nl.ndarray(x.shape, dtype=nl.float32, buffer=nl.sbuf)
    nisa.tensor_scalar(dst=small, data=tx, op0=nl.less_equal, operand0=0.5)
    nisa.tensor_copy_predicated(dst=dst, src=0.25, predicate=small, reverse_pred=True)
    nl.store(out, value=dst)
    return out


def test_tensor_copy_predicated_matches_numpy_where() -> None:
    x, y = _rand(60, 50), _rand(60, 50, seed=1) + 5
    got = nki.simulate(clamp_negatives)(x, y)
    want = np.where(x > 0.5, np.float32(0.25), np.where(x > 0, x, y))
    np.testing.assert_array_equal(got, want)


def test_tensor_copy_predicated_emits_and_traces_back() -> None:
    source = nki_round_trip(clamp_negatives, _rand(8, 16), _rand(8, 16))
    assert "nisa.tensor_copy_predicated(dst=t1, src=t0, predicate=t2)" in source
    assert "nisa.tensor_copy_predicated(dst=t1, src=0.25, predicate=t3, reverse_pred=True)" in source


def test_tensor_copy_predicated_operand_errors() -> None:
    x = _rand(8, 16)

    def tile(*shape: int, dtype: Any = nl.float32) -> Any:
        return nl.ndarray(shape, dtype=dtype, buffer=nl.sbuf)

    with pytest.raises(TraceError, match=r"tensor_copy_predicated: predicate has shape \[8, 4\]"):
        _one(lambda t: nisa.tensor_copy_predicated(dst=t, src=t, predicate=tile(8, 4)), target="trn2")(x)
    with pytest.raises(TraceError, match="tensor_copy_predicated: src is bf16 but dst is f32"):
        _one(
            lambda t: nisa.tensor_copy_predicated(dst=t, src=tile(8, 16, dtype=nl.bfloat16), predicate=t),
            target="trn2",
        )(x)


@nki.jit
def causal_mask(scores):
    """``scores`` with the elements above the diagonal (``f > p``) set to ``-inf``, through
    ``nisa.affine_select`` (``p - f >= 0``), and the diagonal alone (``p - f == 0``)."""
    p, n = scores.shape
    masked = nl.ndarray((p, n), dtype=scores.dtype, buffer=nl.shared_hbm)
    diagonal = nl.ndarray((p, n), dtype=scores.dtype, buffer=nl.shared_hbm)
    t = nl.load(scores)
    m = nl.ndarray((p, n), dtype=scores.dtype, buffer=nl.sbuf)
    nisa.affine_select(
        dst=m,
        pattern=[[-1, n]],
        channel_multiplier=1,
        on_true_tile=t,
        on_false_value=float("-inf"),
        cmp_op=nl.greater_equal,
    )
    d = nl.ndarray((p, n), dtype=scores.dtype, buffer=nl.sbuf)
    nisa.affine_select(dst=d, pattern=[[-1, n]], channel_multiplier=1, on_true_tile=t, on_false_value=0.0)
    nl.store(masked, value=m)
    nl.store(diagonal, value=d)
    return masked, diagonal


def test_affine_select_builds_a_causal_mask() -> None:
    x = _rand(64, 100)
    masked, diagonal = nki.simulate(causal_mask)(x)
    keep = np.arange(100)[None, :] <= np.arange(64)[:, None]
    np.testing.assert_array_equal(masked, np.where(keep, x, -np.inf))
    np.testing.assert_array_equal(diagonal, np.where(np.eye(64, 100, dtype=bool), x, 0.0))


def test_affine_select_emits_and_traces_back() -> None:
    source = nki_round_trip(causal_mask, _rand(8, 16))
    assert (
        "nisa.affine_select(dst=t1, pattern=[[-1, 16]], channel_multiplier=1, on_true_tile=t0, "
        "on_false_value=float('-inf'), cmp_op=nl.greater_equal, offset=0)"
    ) in source
    assert "on_false_value=0.0, cmp_op=nl.equal, offset=0)" in source


def test_affine_select_operand_errors() -> None:
    x = _rand(8, 16)
    with pytest.raises(TraceError, match=r"affine_select: cmp_op is nl\.add, but it must be a comparison"):
        _one(
            lambda t: nisa.affine_select(
                dst=t,
                pattern=[[1, 16]],
                channel_multiplier=0,
                on_true_tile=t,
                on_false_value=0.0,
                cmp_op=nl.add,
            ),
            target="trn2",
        )(x)
    with pytest.raises(NotImplementedError, match="not one arithmetic progression"):
        _one(
            lambda t: nisa.affine_select(
                dst=t, pattern=[[1, 4], [1, 4]], channel_multiplier=0, on_true_tile=t, on_false_value=0.0
            ),
            target="trn2",
        )(x)

    @nki.jit
    def into_psum(x):
        out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
        t = nl.load(x)
        acc = nl.ndarray(x.shape, dtype=nl.float32, buffer=nl.psum)
        nisa.affine_select(
            dst=acc, pattern=[[1, 16]], channel_multiplier=0, on_true_tile=t, on_false_value=0.0
        )
        nisa.tensor_copy(dst=t, src=acc)
        nl.store(out, value=t)
        return out

    with pytest.raises(ValidationError, match="affine_select runs on GpSimd, which cannot access PSUM"):
        nki.simulate(into_psum)(x)

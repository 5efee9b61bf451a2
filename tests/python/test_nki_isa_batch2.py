"""The frontend arms of the second batch of added instructions (``tensor_tensor_scan``, the
cross-partition ones): each runs through ``nisa.<name>(...)`` against a NumPy / torch loop, emits
NKI source that traces back to the same program, and its operand errors and unimplemented
keywords name the call."""

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
def linear_recurrence(a, b, h0):
    """``h[i] = a[i] · h[i-1] + b[i]`` along each row from 0.0 (as the fused-mamba tutorial's
    scan) and from the per-row column ``h0``; also ``h[i] = b[i] - (h[i-1] - a[i])`` through
    ``reverse0`` / ``reverse1``."""
    p, n = a.shape
    out = nl.ndarray((p, 3 * n), dtype=a.dtype, buffer=nl.shared_hbm)
    ta, tb, t0 = nl.load(a), nl.load(b), nl.load(h0)
    h = nl.ndarray((p, 3 * n), dtype=a.dtype, buffer=nl.sbuf)
    nisa.tensor_tensor_scan(dst=h[:, 0:n], data0=ta, data1=tb, initial=0.0, op0=nl.multiply, op1=nl.add)
    nisa.tensor_tensor_scan(dst=h[:, n : 2 * n], data0=ta, data1=tb, initial=t0, op0=nl.multiply, op1=nl.add)
    nisa.tensor_tensor_scan(
        dst=h[:, 2 * n : 3 * n],
        data0=ta,
        data1=tb,
        initial=t0,
        op0=nl.subtract,
        op1=nl.subtract,
        reverse0=True,
        reverse1=True,
    )
    nl.store(out, value=h)
    return out


def _scan_loop(a: np.ndarray, b: np.ndarray, h0: np.ndarray, step: Any, to: Any) -> np.ndarray:
    """The scan as a loop: the state in fp32, each element converted by ``to`` on write."""
    out = np.empty(a.shape, dtype=np.float32)
    state = h0.astype(np.float32).copy()
    for i in range(a.shape[1]):
        state = step(a[:, i], state, b[:, i]).astype(np.float32)
        out[:, i] = to(state)
    return out


def test_tensor_tensor_scan_matches_a_numpy_loop() -> None:
    p, n = 70, 90
    a, b, h0 = _rand(p, n) * 0.5 + 0.5, _rand(p, n, seed=1), _rand(p, 1, seed=2)
    got = nki.simulate(linear_recurrence)(a, b, h0)

    def fma(x: np.ndarray, h: np.ndarray, y: np.ndarray) -> np.ndarray:
        return x * h + y

    def sub(x: np.ndarray, h: np.ndarray, y: np.ndarray) -> np.ndarray:
        return y - (h - x)

    keep = np.asarray
    np.testing.assert_array_equal(got[:, 0:n], _scan_loop(a, b, np.zeros((p,), np.float32), fma, keep))
    np.testing.assert_array_equal(got[:, n : 2 * n], _scan_loop(a, b, h0[:, 0], fma, keep))
    np.testing.assert_array_equal(got[:, 2 * n :], _scan_loop(a, b, h0[:, 0], sub, keep))


def test_tensor_tensor_scan_in_bf16_carries_fp32_and_rounds_each_element_once() -> None:
    p, n = 16, 200
    a = (torch.rand(p, n) * 0.5 + 0.5).to(torch.bfloat16)
    b = torch.rand(p, n).to(torch.bfloat16)
    h0 = torch.zeros(p, 1, dtype=torch.bfloat16)
    got = linear_recurrence(a, b, h0)
    assert got.dtype == torch.bfloat16

    def to_bf16(v: np.ndarray) -> np.ndarray:
        return torch.from_numpy(v).to(torch.bfloat16).float().numpy()

    def fma(x: np.ndarray, h: np.ndarray, y: np.ndarray) -> np.ndarray:
        return x * h + y

    af, bf = a.float().numpy(), b.float().numpy()
    want = _scan_loop(af, bf, np.zeros((p,), np.float32), fma, to_bf16)
    np.testing.assert_array_equal(got[:, 0:n].float().numpy(), want)
    # A state rounded to bf16 at every step drifts away from that.
    carried = np.zeros((p,), np.float32)
    drifted = np.empty((p, n), np.float32)
    for i in range(n):
        carried = to_bf16(af[:, i] * carried + bf[:, i])
        drifted[:, i] = carried
    assert not np.array_equal(drifted, want)


def test_tensor_tensor_scan_emits_and_traces_back() -> None:
    source = nki_round_trip(linear_recurrence, _rand(8, 16), _rand(8, 16), _rand(8, 1))
    assert (
        "nisa.tensor_tensor_scan(dst=t3[0:8, 0:16], data0=t0, data1=t1, initial=0.0, "
        "op0=nl.multiply, op1=nl.add)"
    ) in source
    assert "op0=nl.subtract, op1=nl.subtract, reverse0=True, reverse1=True)" in source


def _one(body: Any, target: str = "trn2") -> Any:
    @nki.jit(target=target)
    def k(x):
        out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
        t = nl.load(x)
        body(t)
        nl.store(out, value=t)
        return out

    return nki.simulate(k)


def test_tensor_tensor_scan_operand_errors_name_the_call() -> None:
    x = _rand(8, 16)

    def col(rows: int) -> Any:
        return nl.ndarray((rows, 1), dtype=nl.float32, buffer=nl.sbuf)

    def scan(t: Any, **kwargs: Any) -> None:
        nisa.tensor_tensor_scan(dst=t, data0=t, op0=nl.multiply, op1=nl.add, **kwargs)

    with pytest.raises(TraceError, match=r"tensor_tensor_scan: initial must be a \(8, 1\) column"):
        _one(lambda t: scan(t, data1=t, initial=col(4)))(x)
    with pytest.raises(TraceError, match=r"tensor_tensor_scan: data1 has shape \[8, 4\] but data0"):
        _one(lambda t: scan(t, data1=t[:, 0:4], initial=0.0))(x)

    def both_in_psum(t: Any) -> None:
        ps = nl.ndarray((8, 16), dtype=nl.float32, buffer=nl.psum)
        nisa.tensor_copy(dst=ps, src=t)
        nisa.tensor_tensor_scan(dst=t, data0=ps, data1=ps, initial=0.0, op0=nl.multiply, op1=nl.add)

    with pytest.raises(ValidationError, match=r"tensor_tensor_scan: data0 .* are both in PSUM"):
        _one(both_in_psum)(x)


@nki.jit
def column_stats(x):
    """The column sums and maxima of ``x`` through ``nisa.tensor_partition_reduce``."""
    n = x.shape[1]
    out = nl.ndarray((2, n), dtype=x.dtype, buffer=nl.shared_hbm)
    t = nl.load(x)
    s = nl.ndarray((1, n), dtype=x.dtype, buffer=nl.sbuf)
    m = nl.ndarray((1, n), dtype=x.dtype, buffer=nl.sbuf)
    nisa.tensor_partition_reduce(dst=s, op=nl.add, data=t)
    nisa.tensor_partition_reduce(dst=m, op=nl.maximum, data=t)
    nl.store(out[0:1, :], value=s)
    nl.store(out[1:2, :], value=m)
    return out


def test_tensor_partition_reduce_matches_numpy() -> None:
    x = _rand(100, 70)
    got = nki.simulate(column_stats)(x)
    want = x[0].copy()
    for r in range(1, x.shape[0]):
        want = (want + x[r]).astype(np.float32)
    np.testing.assert_array_equal(got[0], want)
    np.testing.assert_array_equal(got[1], x.max(axis=0))


def test_tensor_partition_reduce_in_bf16_sums_in_fp32_and_rounds_once() -> None:
    x = torch.rand(128, 40).to(torch.bfloat16)
    got = column_stats(x)
    assert got.dtype == torch.bfloat16
    xf = x.float().numpy()
    want = xf[0].copy()
    for r in range(1, xf.shape[0]):
        want = (want + xf[r]).astype(np.float32)
    torch.testing.assert_close(got[0], torch.from_numpy(want).to(torch.bfloat16), rtol=0, atol=0)
    torch.testing.assert_close(got[1], x.max(dim=0).values, rtol=0, atol=0)


def test_tensor_partition_reduce_emits_and_traces_back() -> None:
    source = nki_round_trip(column_stats, _rand(8, 16))
    assert "nisa.tensor_partition_reduce(dst=t1, op=nl.add, data=t0)" in source
    assert "nisa.tensor_partition_reduce(dst=t2, op=nl.maximum, data=t0)" in source


def test_tensor_partition_reduce_errors_name_the_call() -> None:
    x = _rand(8, 16)

    def row() -> Any:
        return nl.ndarray((1, 16), dtype=nl.float32, buffer=nl.sbuf)

    bitvec_on_floats = r"tensor_partition_reduce: the bitvec operator nl\.bitwise_or works on integer"
    with pytest.raises(TraceError, match=bitvec_on_floats):
        _one(lambda t: nisa.tensor_partition_reduce(dst=row(), op=nl.bitwise_or, data=t))(x)
    not_a_partition_reduction = "tensor_partition_reduce: op must be add, maximum, bitwise_or or bitwise_and"
    with pytest.raises(TraceError, match=not_a_partition_reduction):
        _one(lambda t: nisa.tensor_partition_reduce(dst=row(), op=nl.subtract, data=t))(x)
    with pytest.raises(TraceError, match=r"tensor_partition_reduce: dst must be one partition"):
        _one(lambda t: nisa.tensor_partition_reduce(dst=t, op=nl.add, data=t))(x)

    def from_psum(t: Any) -> None:
        ps = nl.ndarray((8, 16), dtype=nl.float32, buffer=nl.psum)
        nisa.tensor_copy(dst=ps, src=t)
        nisa.tensor_partition_reduce(dst=row(), op=nl.add, data=ps)

    with pytest.raises(ValidationError, match="tensor_partition_reduce runs on GpSimd"):
        _one(from_psum)(x)


REVERSE_PAIRS = [i ^ 1 for i in range(30)] + [255, 255]


@nki.jit
def shuffled(x):
    """``nisa.nc_stream_shuffle`` of ``x`` (128 partitions): each pair of partitions swapped in
    every quadrant except the last two of each, which keep the earlier copy of ``x``."""
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    t = nl.load(x)
    y = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.sbuf)
    nisa.tensor_copy(dst=y, src=t)
    nisa.nc_stream_shuffle(dst=y, src=t, shuffle_mask=REVERSE_PAIRS)
    nl.store(out, value=y)
    return out


def _shuffle_reference(x: np.ndarray, mask: list[int]) -> np.ndarray:
    want = x.copy()
    for p in range(x.shape[0]):
        if mask[p % 32] != 255:
            want[p] = x[p // 32 * 32 + mask[p % 32]]
    return want


def test_nc_stream_shuffle_matches_the_mask_in_every_quadrant() -> None:
    x = _rand(128, 24)
    np.testing.assert_array_equal(nki.simulate(shuffled)(x), _shuffle_reference(x, REVERSE_PAIRS))
    xb = torch.rand(128, 5).to(torch.bfloat16)
    torch.testing.assert_close(
        shuffled(xb),
        torch.from_numpy(_shuffle_reference(xb.float().numpy(), REVERSE_PAIRS)).to(torch.bfloat16),
    )


def test_nc_stream_shuffle_emits_and_traces_back() -> None:
    source = nki_round_trip(shuffled, _rand(128, 8))
    mask = ", ".join(str(m) for m in REVERSE_PAIRS)
    assert f"nisa.nc_stream_shuffle(dst=t1, src=t0, shuffle_mask=[{mask}])" in source


def test_nc_stream_shuffle_errors_name_the_call() -> None:
    x = _rand(32, 16)
    ident = list(range(32))
    with pytest.raises(TraceError, match="nc_stream_shuffle: shuffle_mask must have 32 entries, got 8"):
        _one(lambda t: nisa.nc_stream_shuffle(dst=t, src=t, shuffle_mask=ident[:8]))(x)
    with pytest.raises(TraceError, match=r"nc_stream_shuffle: shuffle_mask\[0\] is 32"):
        _one(lambda t: nisa.nc_stream_shuffle(dst=t, src=t, shuffle_mask=[32, *ident[1:]]))(x)
    with pytest.raises(ValueError, match=r"shuffle_mask entries are partitions 0\.\.31 or 255"):
        _one(lambda t: nisa.nc_stream_shuffle(dst=t, src=t, shuffle_mask=[-1, *ident[1:]]))(x)
    with pytest.raises(TraceError, match="nc_stream_shuffle: dst has 8 elements per partition but src"):
        _one(lambda t: nisa.nc_stream_shuffle(dst=t[:, 0:8], src=t, shuffle_mask=ident))(x)
    with pytest.raises(ValidationError, match=r"nc_stream_shuffle: dst .* starts at partition 16"):
        _one(lambda t: nisa.nc_stream_shuffle(dst=t[16:32, :], src=t[0:16, :], shuffle_mask=ident))(x)

"""``nc_matmul(perf_mode=double_row)``, the Trainium2 architecture guide's double FP8 mode:
``stationary`` ``[K/2, 2, M]`` and ``moving`` ``[K/2, 2, N]`` contract over their partitions
and their most major free dim of 2 into one ``[M, N]`` PSUM result."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

import torch_nki.nki.isa as nisa
import torch_nki.nki.language as nl
from torch_nki import ValidationError, nki
from torch_nki.errors import TraceError


def _kernel(perf_mode: object, shape: tuple[int, ...] = (8, 2, 16)) -> nki.Kernel:
    @nki.jit
    def double_row(s, m):
        out = nl.ndarray((shape[-1], 32), dtype=nl.float32, buffer=nl.shared_hbm)
        st = nl.ndarray(shape, dtype=nl.float8_e4m3, buffer=nl.sbuf)
        mv = nl.ndarray((8, 2, 32), dtype=nl.float8_e4m3, buffer=nl.sbuf)
        nisa.dma_copy(dst=st, src=s)
        nisa.dma_copy(dst=mv, src=m)
        acc = nl.ndarray((shape[-1], 32), dtype=nl.float32, buffer=nl.psum)
        nisa.nc_matmul(dst=acc, stationary=st, moving=mv, perf_mode=perf_mode)
        nl.store(out, value=nl.copy(acc))
        return out

    return double_row


def _inputs(shape: tuple[int, ...] = (8, 2, 16)) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(0)
    fp8 = ml_dtypes.float8_e4m3
    return rng.standard_normal(shape).astype(fp8), rng.standard_normal((8, 2, 32)).astype(fp8)


@pytest.mark.parametrize("perf_mode", [nisa.matmul_perf_mode.double_row, "double_row"], ids=["enum", "str"])
def test_double_row_contracts_over_partitions_and_the_pair(perf_mode: object) -> None:
    s, m = _inputs()
    got = nki.simulate(_kernel(perf_mode))(s, m)
    want = np.einsum("pjm,pjn->mn", s.astype(np.float32), m.astype(np.float32))
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)


def test_double_row_needs_neuroncore_v3() -> None:
    s, m = _inputs()
    needs = r"double_row needs NeuronCore-v3 or newer, not trn1"
    with nki.default_target("trn1"), pytest.raises(TraceError, match=needs):
        nki.simulate(_kernel("double_row"))(s, m)


def test_double_row_needs_a_pair_as_the_major_free_dim() -> None:
    s, m = _inputs((8, 32))
    with pytest.raises(ValueError, match=r"takes stationary as \[K/2, 2, free\].*got \[8, 32\]"):
        nki.simulate(_kernel("double_row", (8, 32)))(s, m)


def test_double_row_takes_float8_operands_only() -> None:
    @nki.jit
    def bf16_double_row(s, m):
        out = nl.ndarray((16, 32), dtype=nl.float32, buffer=nl.shared_hbm)
        st, mv = nl.load(s), nl.load(m)
        acc = nl.ndarray((16, 32), dtype=nl.float32, buffer=nl.psum)
        nisa.nc_matmul(dst=acc, stationary=st, moving=mv, perf_mode="double_row")
        nl.store(out, value=nl.copy(acc))
        return out

    s, m = (x.astype(ml_dtypes.bfloat16) for x in _inputs())
    takes = r"double_row takes float8_e4m3 or float8_e5m2 operands on trn2; got stationary bfloat16"
    with pytest.raises(ValidationError, match=takes) as e:
        nki.simulate(bf16_double_row)(s, m)
    assert (e.value.rule, e.value.actual) == (
        "matmul-double-row-dtype",
        "stationary bfloat16, moving bfloat16",
    )

"""Every scalar dtype of NKI 0.7 in the frontend: tiles and HBM tensors of each, conversions on
write as docs/nki-frontend.md states them, checked against torch's own conversion where torch
has the dtype (exact for in-range values) and against known values where it does not."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

import torch_nki.nki.isa as nisa
import torch_nki.nki.language as nl
from torch_nki import nki
from torch_nki._dtypes import NKI_TO_TORCH


def _cast_kernel(dtype: object, out_dtype: object):
    """``x`` (f32) copied into a tile of ``dtype`` (the conversion), then into ``out_dtype``."""

    @nki.jit
    def cast(x):
        out = nl.ndarray(x.shape, dtype=out_dtype, buffer=nl.shared_hbm)
        t = nl.load(x)
        narrow = nl.ndarray(x.shape, dtype=dtype, buffer=nl.sbuf)
        nisa.tensor_copy(dst=narrow, src=t)
        back = nl.ndarray(x.shape, dtype=out_dtype, buffer=nl.sbuf)
        nisa.tensor_copy(dst=back, src=narrow)
        nl.store(out, value=back)
        return out

    return cast


def _samples(dtype: torch.dtype) -> torch.Tensor:
    """Values whose conversion to ``dtype`` torch and the documented rule agree on: every value
    for floats (incl. rounding ties and saturation), in-range integers for integers."""
    if dtype == torch.bool:
        return torch.tensor([[0.0, 1.0, -2.5, 0.5, -0.0, 7.0]])
    if not dtype.is_floating_point:
        info = torch.iinfo(dtype)
        lo, hi = max(info.min, -(2**24)), min(info.max, 2**24)
        return torch.tensor([[0.0, 1.0, float(lo), float(hi), float(hi - 1), 3.0]])
    if dtype == torch.float8_e8m0fnu:
        return torch.tensor([[1.5, 1.4, 3.0, 2.9, 6.0, 0.25]])
    rng = np.random.default_rng(0)
    values = rng.standard_normal((4, 64)).astype(np.float32) * 8
    values[0, :6] = [1.0 + 2.0**-8, 1.0 + 3 * 2.0**-8, 0.0, -0.0, 65504.0, 1e-8]
    return torch.from_numpy(values)


TORCH_DTYPES = [d for d in nl.DTYPES if d.native in NKI_TO_TORCH]


@pytest.mark.parametrize("dtype", TORCH_DTYPES, ids=lambda d: d.nki_name)
def test_writing_a_tile_converts_as_torch_does(dtype: nl.DType) -> None:
    want_dtype = NKI_TO_TORCH[dtype.native]
    x = _samples(want_dtype)
    got = _cast_kernel(dtype, dtype)(x)
    assert got.dtype == want_dtype
    want = x.to(want_dtype)
    if want_dtype.is_floating_point:
        torch.testing.assert_close(got.float(), want.float(), rtol=0, atol=0, equal_nan=True)
    else:
        assert torch.equal(got, want)


def test_integer_and_bool_tensors_cross_the_boundary_both_ways() -> None:
    for dtype in (torch.int8, torch.int16, torch.uint8, torch.uint16, torch.uint32, torch.bool):
        x = torch.arange(12, dtype=torch.int64).reshape(3, 4).to(dtype)

        @nki.jit
        def copy(a):
            out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
            nl.store(out, value=nl.load(a))
            return out

        got = copy(x)
        assert got.dtype == dtype and torch.equal(got, x), dtype
    # NumPy holds the integers and bool too.
    x8 = np.array([[-128, 127, 3]], dtype=np.int8)
    np.testing.assert_array_equal(_cast_kernel(nl.int8, nl.int8)(x8.astype(np.float32)), x8)


def test_ieee_float8_e4m3_has_infinities_and_tops_out_at_240() -> None:
    x = np.array([[240.0, 247.0, 248.0, -1e6, 2.0**-9, 2.0**-11, 1.0625, 1.1875]], np.float32)
    got = _cast_kernel(nl.float8_e4m3, nl.float32)(x)
    want = [240.0, 240.0, math.inf, -math.inf, 2.0**-9, 0.0, 1.0, 1.25]
    np.testing.assert_array_equal(got, np.array([want], np.float32))


def test_tfloat32_keeps_ten_mantissa_bits() -> None:
    ulp = 2.0**-10
    x = np.array([[1.0 + ulp, 1.0 + ulp / 2, 1.0 + 1.5 * ulp, 2.0 - ulp / 2]], np.float32)
    got = _cast_kernel(nl.tfloat32, nl.float32)(x)
    np.testing.assert_array_equal(got, np.array([[1.0 + ulp, 1.0, 1.0 + 2 * ulp, 2.0]], np.float32))


def test_dtypes_torch_lacks_cannot_come_back_as_torch_tensors() -> None:
    @nki.jit
    def legacy_fp8(a):
        out = nl.ndarray(a.shape, dtype=nl.float8_e4m3, buffer=nl.shared_hbm)
        t = nl.ndarray(a.shape, dtype=nl.float8_e4m3, buffer=nl.sbuf)
        nisa.tensor_copy(dst=t, src=nl.load(a))
        nl.store(out, value=t)
        return out

    with pytest.raises(TypeError, match="f8e4m3 have no torch equivalent"):
        legacy_fp8(torch.ones(2, 2))


def test_dma_converts_between_dtypes_through_fp32() -> None:
    """NKI's DMA engines convert ``src.dtype`` → float32 → ``dst.dtype``: loads into a tile of
    another dtype, stores into an output of another dtype, ``nl.load(dtype=)``."""
    x = torch.randn(8, 40) * 100

    @nki.jit
    def casts(a):
        to_bf16 = nl.ndarray(a.shape, dtype=nl.bfloat16, buffer=nl.shared_hbm)
        via_tile = nl.ndarray(a.shape, dtype=nl.float32, buffer=nl.shared_hbm)
        to_int = nl.ndarray(a.shape, dtype=nl.int16, buffer=nl.shared_hbm)
        t = nl.load(a)
        nisa.dma_copy(dst=to_bf16, src=t)  # f32 tile → bf16 HBM
        narrow = nl.ndarray(a.shape, dtype=nl.float8_e4m3fn, buffer=nl.sbuf)
        nisa.dma_copy(dst=narrow, src=a)  # f32 HBM → fp8 tile
        nisa.dma_copy(dst=via_tile, src=narrow)
        nl.store(to_int, value=nl.load(a, dtype=nl.int16))
        return to_bf16, via_tile, to_int

    bf16, fp8, i16 = casts(x)
    assert bf16.dtype == torch.bfloat16 and torch.equal(bf16, x.to(torch.bfloat16))
    assert torch.equal(fp8, x.to(torch.float8_e4m3fn).float())
    assert torch.equal(i16, x.round().to(torch.int16))

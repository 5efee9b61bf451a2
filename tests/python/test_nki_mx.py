"""MX (microscaling) in the frontend: the packed dtypes at the torch boundary (bytes in through
``nki.packed``, uint8 bytes out), every fp8 encoding decoded as torch decodes it, fp4 e2m1 by
its table, ``nisa.quantize_mx`` against a torch reference of the docstring's formula,
``nisa.nc_matmul_mx`` against a float64 einsum, a small MX projection kernel in the
nki-library's style (quantise activations, load offline-quantised weights and quadrant-spread
scales, matmul), the codegen round trip, and the errors."""

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

E2M1 = [0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0, -0.0, -0.5, -1.0, -1.5, -2.0, -3.0, -4.0, -6.0]
"""fp4 e2m1 by its 4-bit encoding (sign, 2 exponent bits with bias 1, 1 mantissa bit)."""

E_MAX = {"float8_e4m3fn_x4": 8, "float8_e5m2_x4": 15}
TORCH_FP8 = {"float8_e4m3fn_x4": torch.float8_e4m3fn, "float8_e5m2_x4": torch.float8_e5m2}


def _decode(data: torch.Tensor, dtype: Any) -> torch.Tensor:
    """The lane values of packed bytes ``[P, bytes]``: ``[P, F, 4]`` float32."""
    p = data.shape[0]
    if dtype is nl.float4_e2m1fn_x4:
        nibbles = torch.stack([data & 0xF, data >> 4], dim=-1).reshape(p, -1).long()
        return torch.tensor(E2M1)[nibbles].reshape(p, -1, 4)
    return data.contiguous().view(TORCH_FP8[dtype.nki_name]).float().reshape(p, -1, 4)


@nki.jit(target="trn3")
def decode_lanes(stationary: Any, moving: Any, scales: Any) -> Any:
    """``out[m, n] = sum over k and lanes of stationary · moving`` with scale 2^0: with one 1 in lane 0 of
    the moving tile's row 0, column ``m`` of the output is lane 0 of ``stationary[0, m]``."""
    k, m = stationary.shape
    n = moving.shape[1]
    out = nl.ndarray((m, n), dtype=nl.float32, buffer=nl.shared_hbm)
    st = nl.ndarray((k, m), dtype=stationary.dtype, buffer=nl.sbuf)
    mv = nl.ndarray((k, n), dtype=moving.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=st, src=stationary)
    nisa.dma_copy(dst=mv, src=moving)
    s_scale = nl.ndarray((k // 8, m), dtype=nl.uint8, buffer=nl.sbuf)
    m_scale = nl.ndarray((k // 8, n), dtype=nl.uint8, buffer=nl.sbuf)
    nisa.dma_copy(dst=s_scale, src=scales[:, 0:m])
    nisa.dma_copy(dst=m_scale, src=scales[:, 0:n])
    acc = nl.ndarray((m, n), dtype=nl.float32, buffer=nl.psum)
    nisa.nc_matmul_mx(dst=acc, stationary=st, moving=mv, stationary_scale=s_scale, moving_scale=m_scale)
    res = nl.ndarray((m, n), dtype=nl.float32, buffer=nl.sbuf)
    nisa.tensor_copy(dst=res, src=acc)
    nisa.dma_copy(dst=out, src=res)
    return out


def _lane0_bytes(codes: list[int], dtype: Any) -> torch.Tensor:
    """A packed ``[32, len(codes)]`` stationary tile's bytes: ``codes`` in lane 0 of row 0,
    zeros elsewhere."""
    size = 2 if dtype is nl.float4_e2m1fn_x4 else 4
    data = torch.zeros((32, len(codes) * size), dtype=torch.uint8)
    for i, c in enumerate(codes):
        data[0, i * size] = c
    return data


@pytest.mark.parametrize("dtype", [nl.float8_e4m3fn_x4, nl.float8_e5m2_x4, nl.float4_e2m1fn_x4])
def test_every_encoding_decodes_as_torch_or_the_e2m1_table_says(dtype: Any) -> None:
    fp4 = dtype is nl.float4_e2m1fn_x4
    codes = list(range(16 if fp4 else 256))
    one = {"float4_e2m1fn_x4": 0x2, "float8_e4m3fn_x4": 0x38, "float8_e5m2_x4": 0x3C}[dtype.nki_name]
    moving = _lane0_bytes([one], dtype)
    scales = torch.full((4, 128), 127, dtype=torch.uint8)
    got = []
    for chunk in range(0, len(codes), 128):
        part = codes[chunk : chunk + 128]
        out = decode_lanes(nki.packed(_lane0_bytes(part, dtype), dtype), nki.packed(moving, dtype), scales)
        got.append(out[:, 0])
    values = torch.cat(got)
    if fp4:
        want = torch.tensor(E2M1)
    else:
        want = torch.tensor(codes, dtype=torch.uint8).view(TORCH_FP8[dtype.nki_name]).float()
    assert torch.equal(values.isnan(), want.isnan())
    finite = ~want.isnan()
    # -0.0 · 1 + 0 is +0.0: compare values, and the signs of the nonzero ones.
    assert torch.equal(values[finite], want[finite])


def _reference_quantize(x: torch.Tensor, dtype: Any) -> tuple[torch.Tensor, torch.Tensor]:
    """The docstring's ``quantize_mx`` of ``x`` ``[P, 4F]``: packed bytes ``[P, 4F]`` uint8 and
    scale bytes ``[P/8, F]``."""
    p, f4 = x.shape
    groups = x.double().reshape(p // 8, 8, f4 // 4, 4)
    amax = groups.abs().amax(dim=(1, 3))
    e = torch.where(amax > 0, torch.floor(torch.log2(amax.clamp_min(1e-300))), torch.full_like(amax, -1000))
    byte = (e - (E_MAX[dtype.nki_name] - 1) + 127).clamp(0, 254)
    scale = torch.pow(2.0, byte - 127)[:, None, :, None]
    q = (groups / scale).float().reshape(p, f4).to(TORCH_FP8[dtype.nki_name])
    return q.view(torch.uint8), byte.to(torch.uint8)


@nki.jit(target="trn3")
def quantize(x: Any, dtype: Any) -> Any:
    p, f4 = x.shape
    data = nl.ndarray((p, f4 // 4), dtype=dtype, buffer=nl.shared_hbm)
    scales = nl.ndarray((p, f4 // 4), dtype=nl.uint8, buffer=nl.shared_hbm)
    src = nl.ndarray((p, f4), dtype=x.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=src, src=x)
    q = nl.ndarray((p, f4 // 4), dtype=dtype, buffer=nl.sbuf)
    s = nl.ndarray((p, f4 // 4), dtype=nl.uint8, buffer=nl.sbuf)
    nisa.memset(dst=s, value=0)
    nisa.quantize_mx(dst=q, src=src, dst_scale=s)
    nisa.dma_copy(dst=data, src=q)
    nisa.dma_copy(dst=scales, src=s)
    return data, scales


@pytest.mark.parametrize("dtype", [nl.float8_e4m3fn_x4, nl.float8_e5m2_x4])
@pytest.mark.parametrize("src_dtype", [torch.bfloat16, torch.float16])
def test_quantize_mx_matches_torch(dtype: Any, src_dtype: torch.dtype) -> None:
    g = torch.Generator().manual_seed(3)
    x = torch.randn((128, 64), generator=g) * torch.pow(2.0, torch.randint(-6, 7, (128, 64), generator=g))
    x[0:8, 0:4] = 0.0  # an all-zero group: scale 2^-127, values 0
    x = x.to(src_dtype)
    data, scales = quantize(x, dtype)
    assert data.dtype == torch.uint8 and tuple(data.shape) == (128, 64)
    want_data, want_scales = _reference_quantize(x, dtype)
    assert torch.equal(data, want_data)
    rows = [32 * (g // 4) + g % 4 for g in range(16)]
    assert torch.equal(scales[rows], want_scales)
    assert int(scales[0, 0]) == 0
    unused = [r for r in range(128) if r not in rows]
    assert bool((scales[unused] == 0).all())


def _dequantise(data: torch.Tensor, scales: torch.Tensor, dtype: Any) -> torch.Tensor:
    """``[K, F, 4]`` float64 lane values times ``2^(scale - 127)`` of their group; ``scales``
    ``[K/8, F]`` contiguous."""
    lanes = _decode(data, dtype).double()
    factor = torch.pow(2.0, scales.double() - 127).repeat_interleave(8, dim=0)
    return lanes * factor[:, :, None]


@nki.jit(target="trn3")
def mx_projection(x: Any, w: Any, w_scale: Any) -> Any:
    """``out[n, m] = Σ_h x[h, n] · w[h, m]`` the MX way, in the nki-library's style: the bf16
    activations ``x`` ``[128, 4N]`` (already in the MX layout) quantised on the vector
    engine, the offline-quantised weights ``w`` ``[128, M]`` loaded as they are, their
    contiguous scales ``w_scale`` ``[16, M]`` spread over the four quadrants, one
    ``nc_matmul_mx`` per 32-column block of the output accumulating nothing, fp32 PSUM."""
    p, n4 = x.shape
    n, m = n4 // 4, w.shape[1]
    out = nl.ndarray((m, n), dtype=nl.float32, buffer=nl.shared_hbm)
    x_sb = nl.ndarray((p, n4), dtype=nl.bfloat16, buffer=nl.sbuf)
    nisa.dma_copy(dst=x_sb, src=x)
    x_q = nl.ndarray((p, n), dtype=nl.float8_e4m3fn_x4, buffer=nl.sbuf)
    x_s = nl.ndarray((p, n), dtype=nl.uint8, buffer=nl.sbuf)
    nisa.quantize_mx(dst=x_q, src=x_sb, dst_scale=x_s)
    w_sb = nl.ndarray((p, m), dtype=w.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=w_sb, src=w)
    w_s = nl.ndarray((p, m), dtype=nl.uint8, buffer=nl.sbuf)
    nisa.memset(dst=w_s, value=0)
    for q in nl.static_range(p // 32):
        nisa.dma_copy(dst=w_s[32 * q : 32 * q + 4, :], src=w_scale[4 * q : 4 * q + 4, :])
    res = nl.ndarray((m, n), dtype=nl.float32, buffer=nl.sbuf)
    for j in nl.affine_range(m // 32):
        acc = nl.ndarray((32, n), dtype=nl.float32, buffer=nl.psum)
        nisa.nc_matmul_mx(
            dst=acc,
            stationary=w_sb[:, 32 * j : 32 * j + 32],
            moving=x_q,
            stationary_scale=w_s[:, 32 * j : 32 * j + 32],
            moving_scale=x_s,
        )
        nisa.tensor_copy(dst=res[32 * j : 32 * j + 32, :], src=acc)
    nisa.dma_copy(dst=out, src=res)
    return out


def test_a_small_mx_projection_kernel_matches_the_dequantised_product() -> None:
    g = torch.Generator().manual_seed(7)
    n, m = 48, 64
    x = (torch.randn((128, 4 * n), generator=g) * 3).to(torch.bfloat16)
    # Offline weights: random e4m3fn bytes (no NaNs) and scales near 2^0.
    w_bytes = torch.randint(0, 256, (128, 4 * m), generator=g, dtype=torch.uint8)
    w_bytes[(w_bytes & 0x7F) == 0x7F] = 0x38
    w_scale = torch.randint(122, 130, (16, m), generator=g, dtype=torch.uint8)
    out = mx_projection(x, nki.packed(w_bytes, nl.float8_e4m3fn_x4), w_scale)
    assert tuple(out.shape) == (m, n) and out.dtype == torch.float32
    x_bytes, x_scale = _reference_quantize(x, nl.float8_e4m3fn_x4)
    w = _dequantise(w_bytes, w_scale, nl.float8_e4m3fn_x4)
    a = _dequantise(x_bytes, x_scale, nl.float8_e4m3fn_x4)
    want = torch.einsum("kmq,knq->mn", w, a)
    torch.testing.assert_close(out.double(), want, rtol=1e-6, atol=1e-30)
    # And the quantisation error against the bf16 product is MX-sized (e4m3fn: 3 mantissa bits).
    exact = torch.einsum("kmq,knq->mn", w, x.double().reshape(128, n, 4))
    assert float((out.double() - exact).abs().max()) < 0.1 * float(exact.abs().max())


def test_fp4_weights_with_e8m0_scales_and_accumulation() -> None:
    @nki.jit(target="trn3")
    def fp4_twice(w: Any, v: Any, scales: Any) -> Any:
        k, m = w.shape
        n = v.shape[1]
        out = nl.ndarray((m, n), dtype=nl.bfloat16, buffer=nl.shared_hbm)
        w_sb = nl.ndarray((k, m), dtype=w.dtype, buffer=nl.sbuf)
        v_sb = nl.ndarray((k, n), dtype=v.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=w_sb, src=w)
        nisa.dma_copy(dst=v_sb, src=v)
        s = nl.ndarray((k // 8, m), dtype=nl.float8_e8m0fnu, buffer=nl.sbuf)
        nisa.dma_copy(dst=s, src=scales)
        acc = nl.ndarray((m, n), dtype=nl.bfloat16, buffer=nl.psum)
        for i in nl.sequential_range(2):
            nisa.nc_matmul_mx(
                dst=acc,
                stationary=w_sb,
                moving=v_sb,
                stationary_scale=s,
                moving_scale=s[:, 0:n],
                accumulate=i > 0,
            )
        res = nl.ndarray((m, n), dtype=nl.bfloat16, buffer=nl.sbuf)
        nisa.tensor_copy(dst=res, src=acc)
        nisa.dma_copy(dst=out, src=res)
        return out

    g = torch.Generator().manual_seed(11)
    k, m, n = 32, 16, 8
    w_bytes = torch.randint(0, 256, (k, 2 * m), generator=g, dtype=torch.uint8)
    v_bytes = torch.randint(0, 256, (k, 2 * n), generator=g, dtype=torch.uint8)
    scale_bytes = torch.randint(124, 130, (k // 8, m), generator=g, dtype=torch.uint8)
    scales = scale_bytes.view(torch.float8_e8m0fnu)
    out = fp4_twice(
        nki.packed(w_bytes, nl.float4_e2m1fn_x4), nki.packed(v_bytes, nl.float4_e2m1fn_x4), scales
    )
    w = _dequantise(w_bytes, scale_bytes, nl.float4_e2m1fn_x4)
    v = _dequantise(v_bytes, scale_bytes[:, 0:n], nl.float4_e2m1fn_x4)
    once = torch.einsum("kmq,knq->mn", w, v).float().to(torch.bfloat16)
    want = (once.float() + torch.einsum("kmq,knq->mn", w, v).float()).to(torch.bfloat16)
    assert torch.equal(out, want)


def test_packed_data_round_trips_as_bytes_and_the_codegen_round_trips() -> None:
    @nki.jit
    def copy(x: Any) -> Any:
        out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
        t = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=x)
        nisa.dma_copy(dst=out, src=t)
        return out

    raw = np.arange(4 * 24, dtype=np.uint32).reshape(4, 24) * 2654435761
    out = copy(nki.packed(raw, nl.float8_e5m2_x4))
    assert out.dtype == np.uint8 and out.shape == (4, 96)
    assert np.array_equal(out.view(np.uint32), raw)
    halves = torch.arange(4 * 6, dtype=torch.int16).reshape(4, 6)
    out16 = copy(nki.packed(halves, nl.float4_e2m1fn_x4))
    assert torch.equal(out16.view(torch.int16), halves)
    source = nki_round_trip(
        quantize, torch.ones((32, 16), dtype=torch.bfloat16), nl.float8_e4m3fn_x4, target="trn3"
    )
    assert "nisa.quantize_mx(dst=" in source and "dtype=nl.float8_e4m3fn_x4" in source


def test_mx_errors_are_named() -> None:
    x = torch.ones((32, 16), dtype=torch.bfloat16)
    with pytest.raises(ValidationError, match=r"quantize_mx needs NeuronCore-v4") as e:
        nki.jit(quantize.fn, target="trn2")(x, nl.float8_e4m3fn_x4)
    assert e.value.rule == "isa-target"
    with pytest.raises(ValidationError) as e:
        quantize(x.float(), nl.float8_e4m3fn_x4)
    assert e.value.rule == "quantize-mx-dtype"
    with pytest.raises(ValidationError) as e:
        quantize(x, nl.float4_e2m1fn_x4)
    assert e.value.rule == "quantize-mx-dtype"

    @nki.jit(target="trn3")
    def bad_shape(x: Any) -> Any:
        src = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=src, src=x)
        q = nl.ndarray((32, 3), dtype=nl.float8_e4m3fn_x4, buffer=nl.sbuf)
        s = nl.ndarray((4, 3), dtype=nl.uint8, buffer=nl.sbuf)
        nisa.quantize_mx(dst=q, src=src, dst_scale=s)
        return nl.ndarray((1, 1), dtype=nl.float32, buffer=nl.shared_hbm)

    with pytest.raises(TraceError, match=r"quantize_mx: src has shape \[32, 16\], so dst must be \[32, 4\]"):
        bad_shape(x)

    @nki.jit(target="trn3")
    def arithmetic_on_packed(x: Any) -> Any:
        out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
        t = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=x)
        nisa.tensor_copy(dst=t, src=t)
        nisa.dma_copy(dst=out, src=t)
        return out

    with pytest.raises(ValidationError, match=r"a packed MX dtype") as e:
        arithmetic_on_packed(nki.packed(torch.zeros((4, 16), dtype=torch.uint8), nl.float8_e4m3fn_x4))
    assert e.value.rule == "mx-packed-operand"

    @nki.jit(target="trn3")
    def tiled(x: Any, pos: Any, size: Any) -> Any:
        st = nl.ndarray((32, 8), dtype=nl.float8_e4m3fn_x4, buffer=nl.sbuf)
        nisa.dma_copy(dst=st, src=x)
        s = nl.ndarray((4, 8), dtype=nl.uint8, buffer=nl.sbuf)
        nisa.memset(dst=s, value=127)
        acc = nl.ndarray((8, 8), dtype=nl.float32, buffer=nl.psum)
        nisa.nc_matmul_mx(
            dst=acc,
            stationary=st,
            moving=st,
            stationary_scale=s,
            moving_scale=s,
            tile_position=pos,
            tile_size=size,
        )
        out = nl.ndarray((8, 8), dtype=nl.float32, buffer=nl.shared_hbm)
        res = nl.ndarray((8, 8), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_copy(dst=res, src=acc)
        nisa.dma_copy(dst=out, src=res)
        return out

    data = nki.packed(torch.full((32, 32), 0x38, dtype=torch.uint8), nl.float8_e4m3fn_x4)
    # 32 rows of four 1.0 lanes: every output is 128.
    assert bool((tiled(data, (32, 0), (32, 128)) == 128.0).all())
    with pytest.raises(ValidationError) as e:
        tiled(data, (0, 0), (32, 64))
    assert e.value.rule == "nc-matmul-mx-tiling"
    with pytest.raises(TraceError, match=r"both given or neither"):
        tiled(data, (0, 0), None)
    with pytest.raises(TypeError, match=r"not a packed MX dtype"):
        nki.packed(torch.zeros(4, dtype=torch.uint8), nl.float32)
    with pytest.raises(ValueError, match=r"whole 4-byte"):
        nki.packed(torch.zeros((2, 3), dtype=torch.uint8), nl.float8_e5m2_x4)

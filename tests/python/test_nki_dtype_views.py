"""Dtype views (``.view(dtype)``, ``.ap(..., dtype=...)``): a tile or device tensor seen as
another dtype reads and writes the same bytes, as NumPy's ``ndarray.view`` does; the copies
that keep a view in step cost nothing in the estimate."""

from __future__ import annotations

import json

import ml_dtypes
import numpy as np
import pytest

import torch_nki.nki.isa as nisa
import torch_nki.nki.language as nl
from torch_nki import nki

BF16 = ml_dtypes.bfloat16
FP8 = ml_dtypes.float8_e4m3


def _bf16(shape: tuple[int, ...], seed: int) -> np.ndarray:
    return np.random.default_rng(seed).normal(size=shape).astype(BF16)


@nki.jit(target="trn2")
def fp32_tile_as_bf16(x):
    """An fp32 tile read through its bf16 view, copied out as bf16."""
    out = nl.ndarray((128, 128), dtype=nl.bfloat16, buffer=nl.shared_hbm)
    t = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=x)
    u = nl.ndarray((128, 128), dtype=nl.bfloat16, buffer=nl.sbuf)
    nisa.tensor_copy(dst=u, src=t.view(nl.bfloat16))
    nisa.dma_copy(dst=out, src=u)
    return out


def _fp32_of_bf16_pairs(shape: tuple[int, int], seed: int) -> np.ndarray:
    """fp32 values whose two halves are each a finite bf16 (a random fp32's low half is a
    bf16 NaN now and then, which arithmetic may quiet)."""
    rows, cols = shape
    return _bf16((rows, 2 * cols), seed).view(np.float32)


def test_a_tile_read_through_a_wider_view_reads_its_bytes() -> None:
    x = _fp32_of_bf16_pairs((128, 64), 1)
    out = nki.simulate(fp32_tile_as_bf16)(x)
    np.testing.assert_array_equal(out.view(np.uint16), x.view(np.uint16))


@nki.jit(target="trn2")
def bf16_tensor_as_fp32(x):
    """A bf16 input loaded through an fp32 access pattern (two bf16 per element), then its
    halves swapped back through the tile's bf16 view."""
    rows, cols = x.shape
    out = nl.ndarray((rows, cols), dtype=nl.bfloat16, buffer=nl.shared_hbm)
    t = nl.ndarray((rows, cols // 2), dtype=nl.float32, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=x.ap(pattern=[[cols // 2, rows], [1, cols // 2]], dtype=nl.float32))
    halves = t.ap(pattern=[[cols, rows], [2, cols // 2]], dtype=nl.bfloat16)
    swapped = nl.ndarray((rows, cols), dtype=nl.bfloat16, buffer=nl.sbuf)
    nisa.tensor_copy(dst=swapped[:, 0 : cols // 2], src=halves)
    nisa.tensor_copy(
        dst=swapped[:, cols // 2 : cols],
        src=t.ap(pattern=[[cols, rows], [2, cols // 2]], offset=1, dtype=nl.bfloat16),
    )
    nisa.dma_copy(dst=out, src=swapped)
    return out


def test_a_tensor_loaded_through_an_fp32_pattern_keeps_its_bf16_pairs() -> None:
    x = _bf16((64, 32), 2)
    out = nki.simulate(bf16_tensor_as_fp32)(x)
    bits = x.view(np.uint16)
    np.testing.assert_array_equal(out.view(np.uint16), np.concatenate([bits[:, 0::2], bits[:, 1::2]], axis=1))


@nki.jit(target="trn2")
def write_through_a_view(x):
    """bf16 values written into the bf16 view of an fp8 tile (two fp8 per element), then the
    fp8 tile stored: the bytes of the bf16 values, as fp8."""
    rows, cols = x.shape
    out = nl.ndarray((rows, 2 * cols), dtype=nl.float8_e4m3, buffer=nl.shared_hbm)
    t = nl.ndarray((rows, 2 * cols), dtype=nl.float8_e4m3, buffer=nl.sbuf)
    nisa.memset(dst=t, value=0.0)
    v = nl.ndarray((rows, cols), dtype=nl.bfloat16, buffer=nl.sbuf)
    nisa.dma_copy(dst=v, src=x)
    nisa.tensor_copy(dst=t.view(nl.bfloat16), src=v)
    nisa.dma_copy(dst=out, src=t)
    return out


def test_a_write_through_a_narrower_tiles_view_lands_in_its_bytes() -> None:
    # bf16 values whose two bytes are each a finite float8_e4m3 (no 0x7f / 0xff byte).
    bytes_ = np.random.default_rng(3).integers(0, 0x70, size=(16, 16), dtype=np.uint16)
    x = ((bytes_ << 8) | bytes_[::-1]).view(BF16)
    out = nki.simulate(write_through_a_view)(x)
    np.testing.assert_array_equal(out.view(np.uint8), x.view(np.uint8))


@nki.jit(target="trn2")
def part_of_a_wider_element(x):
    """One bf16 half of each fp32 element overwritten through the tile's bf16 view: the other
    half keeps its bytes."""
    out = nl.ndarray(x.shape, dtype=nl.float32, buffer=nl.shared_hbm)
    t = nl.ndarray(x.shape, dtype=nl.float32, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=x)
    rows, cols = x.shape
    nisa.memset(dst=t.ap(pattern=[[2 * cols, rows], [2, cols]], offset=1, dtype=nl.bfloat16), value=1.0)
    nisa.dma_copy(dst=out, src=t)
    return out


def test_writing_half_of_each_element_keeps_the_other_half() -> None:
    x = _fp32_of_bf16_pairs((8, 16), 4)
    out = nki.simulate(part_of_a_wider_element)(x)
    expected = x.view(np.uint16).copy()
    expected[:, 1::2] = np.array(1.0, dtype=BF16).view(np.uint16)
    np.testing.assert_array_equal(out.view(np.uint16), expected)


def test_the_copies_that_keep_views_in_step_cost_nothing() -> None:
    program = nki.trace(fp32_tile_as_bf16, _fp32_of_bf16_pairs((128, 64), 1))
    # The load, the view's sync copy, the tensor_copy and the store: the estimate counts the
    # two transfers and the copy, not the sync.
    assert program.instruction_count() == 4
    report = json.loads(program.cost()[1])
    assert report["dma_transfers"] == 2 and report["instructions"] == 3
    assert report["hbm_read_bytes"] == report["hbm_write_bytes"] == 128 * 64 * 4
    assert ".view(nl.bfloat16)" in program.emit()


def test_a_view_that_is_no_whole_number_of_elements_is_a_value_error() -> None:
    @nki.jit(target="trn2")
    def odd(x):
        t = nl.ndarray((4, 3), dtype=nl.bfloat16, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=x)
        t.view(nl.float32)
        return x

    with pytest.raises(ValueError, match="not a whole number of float32"):
        nki.simulate(odd)(np.zeros((4, 3), BF16))


def test_a_view_of_a_non_contiguous_last_dim_is_a_value_error() -> None:
    @nki.jit(target="trn2")
    def strided(x):
        t = nl.ndarray((4, 8), dtype=nl.float32, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=x)
        t[:, 0:8:2].view(nl.bfloat16)
        return x

    with pytest.raises(ValueError, match="last dimension must be contiguous"):
        nki.simulate(strided)(np.zeros((4, 8), np.float32))


@nki.jit(target="trn3")
def bytes_as_packed_fp8(x):
    """A uint8 input viewed as packed fp8 (the MX tutorial's host layout), moved through an
    fp8_x4 tile into a packed output."""
    rows, cols = x.shape
    packed = x.view(nl.float8_e4m3fn_x4)
    out = nl.ndarray((rows, cols // 4), dtype=nl.float8_e4m3fn_x4, buffer=nl.shared_hbm)
    t = nl.ndarray((rows, cols // 4), dtype=nl.float8_e4m3fn_x4, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=packed)
    nisa.dma_copy(dst=out, src=t)
    return out


def test_a_byte_input_viewed_as_packed_fp8_keeps_its_bytes() -> None:
    x = np.random.default_rng(5).integers(0, 256, size=(32, 16), dtype=np.uint8)
    out = nki.simulate(bytes_as_packed_fp8)(x)
    np.testing.assert_array_equal(np.asarray(out).view(np.uint8).reshape(x.shape), x)


@nki.jit(target="trn2")
def scale_bytes_as_fp8(x):
    """fp32 scales stored as four fp8 bytes each (nki-library's row quantisation stores its
    dequantisation scales so): every byte lands, NaN patterns of fp8 included."""
    rows = x.shape[0]
    out = nl.ndarray((rows, 4), dtype=nl.float8_e4m3, buffer=nl.shared_hbm)
    t = nl.ndarray((rows, 1), dtype=nl.float32, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=x)
    nisa.dma_copy(dst=out, src=t.ap(pattern=[[4, rows], [1, 4]], dtype=nl.float8_e4m3))
    return out


def test_bytes_that_are_fp8_nans_are_stored_as_they_are() -> None:
    x = np.random.default_rng(6).uniform(0.001, 1.0, size=(128, 1)).astype(np.float32)
    bytes_ = x.view(np.uint8).reshape(128, 4)
    assert ((bytes_ & 0x7F) > 0x78).any(), "the sample has fp8 NaN bytes"
    out = nki.simulate(scale_bytes_as_fp8)(x)
    np.testing.assert_array_equal(np.asarray(out).view(np.uint8).reshape(128, 4), bytes_)

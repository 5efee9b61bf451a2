"""Multi-dimensional tiles in the NKI frontend: the partition dimension plus several free
dimensions, shapes kept, indexed with as many indices as dimensions (NumPy basic indexing)."""

from __future__ import annotations

import numpy as np
import pytest

import torch_nki.nki.isa as nisa
import torch_nki.nki.language as nl
from torch_nki import nki


def _rand(*shape: int, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).uniform(-1, 1, shape).astype(np.float32)


@nki.jit
def stack_rows_then_scale(x):
    """``x`` ``[B, P, F]`` loaded into one ``[P, B, F]`` tile, block ``b`` scaled by ``b + 1``,
    stored back."""
    b, p, f = x.shape
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    t = nl.ndarray((p, b, f), dtype=x.dtype, buffer=nl.sbuf)
    for i in nl.affine_range(b):
        nisa.dma_copy(dst=t[0:p, i, 0:f], src=x[i])
    for i in nl.affine_range(b):
        nisa.tensor_scalar(dst=t[:, i, :], data=t[:, i, :], op0=nl.multiply, operand0=float(i + 1))
    for i in nl.affine_range(b):
        nisa.dma_copy(dst=out[i], src=t[:, i])
    return out


def test_a_three_dimensional_tile_is_indexed_per_dimension() -> None:
    x = _rand(3, 16, 10)
    got = stack_rows_then_scale(x)
    np.testing.assert_array_equal(got, x * np.arange(1, 4, dtype=np.float32)[:, None, None])


def test_tile_shapes_follow_numpy_basic_indexing() -> None:
    seen: dict[str, tuple[int, ...]] = {}

    @nki.jit
    def shapes(x):
        out = nl.ndarray((4, 6), dtype=x.dtype, buffer=nl.shared_hbm)
        t = nl.ndarray((4, 2, 3, 6), dtype=nl.float32, buffer=nl.sbuf)
        seen["tile"] = t.shape
        seen["int"] = t[:, 1].shape
        seen["ints"] = t[:, 1, 2].shape
        seen["slice"] = t[0:2, 1, 0:2].shape
        seen["reshaped"] = t.reshape((4, 36)).shape
        seen["loaded"] = nl.load(x.reshape((4, 2, 3))).shape
        nisa.memset(dst=t, value=1.0)
        nisa.dma_copy(dst=out, src=t[:, 1, 2])
        return out

    np.testing.assert_array_equal(shapes(_rand(4, 6)), np.ones((4, 6), np.float32))
    assert seen == {
        "tile": (4, 2, 3, 6),
        "int": (4, 3, 6),
        "ints": (4, 6),
        "slice": (2, 2, 6),
        "reshaped": (4, 36),
        "loaded": (4, 2, 3),
    }


def test_bad_indices_and_reshapes_name_the_problem() -> None:
    @nki.jit
    def too_many(x):
        t = nl.ndarray((4, 2, 3), dtype=nl.float32, buffer=nl.sbuf)
        return t[0, 0, 0, 0]

    with pytest.raises(IndexError, match="4 indices for 3 dimensions"):
        too_many(_rand(4, 2))

    @nki.jit
    def bad_reshape(x):
        t = nl.ndarray((4, 6), dtype=nl.float32, buffer=nl.sbuf)
        return t.reshape((2, 12))

    with pytest.raises(ValueError, match=r"cannot reshape a \(4, 6\) region to \(2, 12\)"):
        bad_reshape(_rand(4, 2))

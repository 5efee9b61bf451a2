"""``nc_matmul(accumulate=None)`` as NKI 0.7 documents it: the flag is inferred per PSUM
location, the first write overwriting and later ones accumulating. Matmuls into distinct column
blocks of one PSUM tile each overwrite their block; repeated matmuls into one block sum; a
destination partly written before is a ValueError asking for the flag."""

from __future__ import annotations

import numpy as np
import pytest

import torch_nki.nki.isa as nisa
import torch_nki.nki.language as nl
from torch_nki import nki


@nki.jit
def blocks(w, h):
    """Column block j of the PSUM tile is w[:, block j]ᵀ @ h, each block written once."""
    out = nl.ndarray((8, 32), dtype=nl.float32, buffer=nl.shared_hbm)
    acc = nl.ndarray((8, 32), dtype=nl.float32, buffer=nl.psum)
    wt, ht = nl.load(w), nl.load(h)
    for j in range(4):
        nisa.nc_matmul(dst=acc[0:8, j * 8 : (j + 1) * 8], stationary=wt[0:16, j * 8 : (j + 1) * 8], moving=ht)
    nl.store(out, value=nl.copy(acc))
    return out


@nki.jit
def repeated(w, h):
    """The same block twice: the second matmul accumulates onto the first."""
    out = nl.ndarray((8, 8), dtype=nl.float32, buffer=nl.shared_hbm)
    acc = nl.ndarray((8, 8), dtype=nl.float32, buffer=nl.psum)
    wt, ht = nl.load(w), nl.load(h)
    for _ in range(2):
        nisa.nc_matmul(dst=acc, stationary=wt[0:16, 0:8], moving=ht)
    nl.store(out, value=nl.copy(acc))
    return out


@nki.jit
def straddles(w, h):
    """The second matmul covers columns 4..12: 4 written before, 4 not."""
    out = nl.ndarray((8, 16), dtype=nl.float32, buffer=nl.shared_hbm)
    acc = nl.ndarray((8, 16), dtype=nl.float32, buffer=nl.psum)
    wt, ht = nl.load(w), nl.load(h)
    nisa.nc_matmul(dst=acc[0:8, 0:8], stationary=wt[0:16, 0:8], moving=ht)
    nisa.nc_matmul(dst=acc[0:8, 4:12], stationary=wt[0:16, 0:8], moving=ht)
    nl.store(out, value=nl.copy(acc))
    return out


def _inputs() -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(0)
    return rng.standard_normal((16, 32)).astype(np.float32), rng.standard_normal((16, 8)).astype(np.float32)


def test_distinct_blocks_of_one_psum_tile_each_overwrite() -> None:
    w, h = _inputs()
    got = nki.simulate(blocks, trap_nonfinite=True)(w, h)
    # Block j is w[:, block j]ᵀ @ h: the stationary's columns are the output's partitions.
    want = np.concatenate([w[:, j * 8 : (j + 1) * 8].T @ h for j in range(4)], axis=1)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def test_a_block_written_twice_accumulates() -> None:
    w, h = _inputs()
    got = nki.simulate(repeated)(w, h)
    np.testing.assert_allclose(got, 2 * (w[:, 0:8].T @ h), rtol=1e-5, atol=1e-5)


def test_a_partly_written_destination_needs_the_flag() -> None:
    w, h = _inputs()
    with pytest.raises(ValueError, match=r"nisa.nc_matmul: accumulate=None, but 32 of the 64 PSUM locations"):
        nki.simulate(straddles)(w, h)

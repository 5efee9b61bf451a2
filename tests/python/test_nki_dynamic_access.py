"""Runtime offsets of HBM access patterns in the NKI frontend: ``tensor.ap(...,
scalar_offset=, vector_offset=, indirect_dim=)`` gathers and scatters rows and elements by
indices an SBUF tile holds when the DMA runs, checked against NumPy, with the generated source
tracing back to the same program and the errors of bad indices."""

from __future__ import annotations

import numpy as np
import pytest

import torch_nki.nki.isa as nisa
import torch_nki.nki.language as nl
from torch_nki import nki
from torch_nki.errors import SimulationError, TraceError, ValidationError

from refs import nki_round_trip


@nki.jit
def gather_rows(table, idx):
    n, d = idx.shape[0], table.shape[1]
    out = nl.ndarray((n, d), dtype=table.dtype, buffer=nl.shared_hbm)
    it = nl.ndarray((n, 1), dtype=nl.int32, buffer=nl.sbuf)
    nisa.dma_copy(dst=it, src=idx)
    rows = nl.ndarray((n, d), dtype=table.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=rows, src=table.ap([[d, n], [1, d]], 0, vector_offset=it, indirect_dim=0))
    nisa.dma_copy(dst=out, src=rows)
    return out


@nki.jit
def scatter_rows(updates, idx, rows):
    n, d = updates.shape
    out = nl.ndarray((rows, d), dtype=updates.dtype, buffer=nl.shared_hbm)
    zeros = nl.ndarray((rows, d), dtype=updates.dtype, buffer=nl.sbuf)
    nisa.memset(dst=zeros, value=0.0)
    nisa.dma_copy(dst=out, src=zeros)
    it = nl.ndarray((n, 1), dtype=nl.int32, buffer=nl.sbuf)
    nisa.dma_copy(dst=it, src=idx)
    u = nl.load(updates)
    nisa.dma_copy(dst=out.ap([[d, n], [1, d]], 0, vector_offset=it, indirect_dim=0), src=u)
    return out


@nki.jit
def pick_targets(logits, targets):
    """``logits[p, targets[p]]`` for every row, one scalar-offset DMA each."""
    b, v = logits.shape
    out = nl.ndarray((b, 1), dtype=logits.dtype, buffer=nl.shared_hbm)
    tt = nl.ndarray((1, b), dtype=nl.int32, buffer=nl.sbuf)
    nisa.dma_copy(dst=tt, src=targets)
    res = nl.ndarray((b, 1), dtype=logits.dtype, buffer=nl.sbuf)
    for p in range(b):
        index = tt.ap(pattern=[[1, 1], [1, 1]], offset=p)
        src = logits.ap(pattern=[[v, 1], [1, 1]], offset=p * v, scalar_offset=index, indirect_dim=1)
        nisa.dma_copy(dst=res[p : p + 1, :], src=src)
    nisa.dma_copy(dst=out, src=res)
    return out


@nki.jit
def gather_rows_skipping(table, idx, fill):
    """``gather_rows`` with ``oob_mode=skip``: rows whose index is outside ``table`` keep
    ``fill``."""
    n, d = idx.shape[0], table.shape[1]
    out = nl.ndarray((n, d), dtype=table.dtype, buffer=nl.shared_hbm)
    it = nl.ndarray((n, 1), dtype=nl.int32, buffer=nl.sbuf)
    nisa.dma_copy(dst=it, src=idx)
    rows = nl.ndarray((n, d), dtype=table.dtype, buffer=nl.sbuf)
    nisa.memset(dst=rows, value=fill)
    src = table.ap([[d, n], [1, d]], 0, vector_offset=it, indirect_dim=0)
    nisa.dma_copy(dst=rows, src=src, oob_mode=nisa.oob_mode.skip)
    nisa.dma_copy(dst=out, src=rows)
    return out


@nki.jit
def scatter_rows_skipping(updates, idx, rows):
    """``scatter_rows`` with ``oob_mode=skip``: updates whose index is outside the output are
    dropped."""
    n, d = updates.shape
    out = nl.ndarray((rows, d), dtype=updates.dtype, buffer=nl.shared_hbm)
    zeros = nl.ndarray((rows, d), dtype=updates.dtype, buffer=nl.sbuf)
    nisa.memset(dst=zeros, value=0.0)
    nisa.dma_copy(dst=out, src=zeros)
    it = nl.ndarray((n, 1), dtype=nl.int32, buffer=nl.sbuf)
    nisa.dma_copy(dst=it, src=idx)
    u = nl.load(updates)
    dst = out.ap([[d, n], [1, d]], 0, vector_offset=it, indirect_dim=0)
    nisa.dma_copy(dst=dst, src=u, oob_mode=nisa.oob_mode.skip)
    return out


def gather_transpose(skip):
    """The API docs' indirect transpose: rows of ``src`` picked by ``idx``, transposed
    (``src[idx].T``); with ``skip``, out-of-bounds indices leave their column at ``-1``."""

    @nki.jit
    def kernel(src, idx):
        rows, width = idx.shape[0], src.shape[1]
        out = nl.ndarray((width, rows), dtype=src.dtype, buffer=nl.shared_hbm)
        it = nl.ndarray((rows, 1), dtype=nl.uint32, buffer=nl.sbuf)
        nisa.dma_copy(dst=it, src=idx)
        got = nl.ndarray((width, rows), dtype=src.dtype, buffer=nl.sbuf)
        nisa.memset(dst=got, value=-1.0)
        view = src.ap(pattern=[[width, rows], [1, width]], vector_offset=it, indirect_dim=0)
        mode = nisa.oob_mode.skip if skip else nisa.oob_mode.error
        nisa.dma_transpose(dst=got, src=view, axes=(1, 0), oob_mode=mode)
        nisa.dma_copy(dst=out, src=got)
        return out

    return kernel


def _table(rows: int, cols: int) -> np.ndarray:
    return np.random.default_rng(3).uniform(-1, 1, (rows, cols)).astype(np.float32)


def test_vector_offsets_gather_rows() -> None:
    table = _table(10, 6)
    idx = np.array([[3], [0], [9], [3]], dtype=np.int32)
    np.testing.assert_array_equal(gather_rows(table, idx), table[idx[:, 0]])
    source = nki_round_trip(gather_rows, table, idx)
    assert "vector_offset=t0, indirect_dim=0" in source


def test_vector_offsets_scatter_rows() -> None:
    updates = _table(3, 5)
    idx = np.array([[4], [1], [6]], dtype=np.int32)
    want = np.zeros((7, 5), np.float32)
    want[idx[:, 0]] = updates
    np.testing.assert_array_equal(scatter_rows(updates, idx, 7), want)
    nki_round_trip(scatter_rows, updates, idx, 7)


def test_oob_mode_skip_skips_the_rows_whose_index_is_out_of_bounds() -> None:
    table = _table(10, 6)
    idx = np.array([[3], [10], [-1], [9], [1000]], dtype=np.int32)
    want = np.full((5, 6), 7.0, np.float32)
    want[[0, 3]] = table[[3, 9]]
    np.testing.assert_array_equal(gather_rows_skipping(table, idx, 7.0), want)
    source = nki_round_trip(gather_rows_skipping, table, idx, 7.0)
    assert "oob_mode=nisa.oob_mode.skip" in source
    # The default (`oob_mode.error`) is a simulation error naming the elements, and is not spelled.
    with pytest.raises(SimulationError, match=r"out-of-bounds HBM access: elements \[60, 65\]"):
        gather_rows(table, idx)
    assert "oob_mode" not in nki_round_trip(gather_rows, table, idx[[0, 3]])

    updates = _table(3, 5)
    idx = np.array([[4], [7], [1]], dtype=np.int32)
    want = np.zeros((7, 5), np.float32)
    want[[4, 1]] = updates[[0, 2]]
    np.testing.assert_array_equal(scatter_rows_skipping(updates, idx, 7), want)
    nki_round_trip(scatter_rows_skipping, updates, idx, 7)


def test_indirect_transpose_gathers_rows_then_transposes() -> None:
    import ml_dtypes

    src = _table(40, 64).astype(ml_dtypes.bfloat16)
    idx = np.random.default_rng(5).integers(0, 40, (32, 1)).astype(np.uint32)
    np.testing.assert_array_equal(gather_transpose(False)(src, idx), src[idx[:, 0]].T)
    assert "vector_offset=t0, indirect_dim=0" in nki_round_trip(gather_transpose(False), src, idx)
    # oob_mode=skip: the columns of out-of-bounds indices keep what dst held.
    idx[[3, 17], 0] = 4000
    want = src[np.minimum(idx[:, 0], 39)].T.astype(np.float32)
    want[:, [3, 17]] = -1.0
    np.testing.assert_array_equal(gather_transpose(True)(src, idx).astype(np.float32), want)
    with pytest.raises(SimulationError, match="out-of-bounds HBM access"):
        gather_transpose(False)(src, idx)
    # The docs' constraints: a 2-byte dtype (and rows a multiple of 16, the last dim <= 128).
    with pytest.raises(ValidationError, match=r"dma-transpose-indirect.*2-byte dtype"):
        gather_transpose(False)(_table(40, 64), idx % 40)


def test_scalar_offsets_pick_one_element_per_row() -> None:
    logits = _table(4, 7)
    targets = np.array([[6, 0, 2, 5]], dtype=np.int32)
    got = pick_targets(logits, targets)
    np.testing.assert_array_equal(got[:, 0], logits[np.arange(4), targets[0]])
    assert "offset=14, scalar_offset=t0[0:1, 2:3], indirect_dim=1" in nki_round_trip(
        pick_targets, logits, targets
    )


def test_bad_indices_and_bad_index_tiles_are_clear_errors() -> None:
    logits = _table(4, 7)
    with pytest.raises(SimulationError, match=r"out-of-bounds HBM access: elements \[84, 84\]"):
        pick_targets(logits, np.array([[6, 0, 70, 5]], dtype=np.int32))

    def indexed_by(dtype, rows):
        @nki.jit
        def gather_two(table):
            out = nl.ndarray((2, 6), dtype=table.dtype, buffer=nl.shared_hbm)
            it = nl.ndarray((rows, 1), dtype=dtype, buffer=nl.sbuf)
            nisa.memset(dst=it, value=1.0)
            got = nl.ndarray((2, 6), dtype=table.dtype, buffer=nl.sbuf)
            nisa.dma_copy(dst=got, src=table.ap([[6, 2], [1, 6]], 0, vector_offset=it, indirect_dim=0))
            nisa.dma_copy(dst=out, src=got)
            return out

        return gather_two

    with pytest.raises(TraceError, match=r"vector_offset must be an integer tile, got f32"):
        indexed_by(nl.float32, 2)(_table(10, 6))
    with pytest.raises(TraceError, match=r"vector_offset must be a \[2, 1\] tile region"):
        indexed_by(nl.int32, 3)(_table(10, 6))
    np.testing.assert_array_equal(indexed_by(nl.int32, 2)(_table(10, 6)), _table(10, 6)[[1, 1]])

    @nki.jit
    def both(table):
        it = nl.ndarray((1, 1), dtype=nl.int32, buffer=nl.sbuf)
        return table.ap([[6, 1], [1, 6]], 0, scalar_offset=it, vector_offset=it)

    with pytest.raises(ValueError, match=r"at most one of scalar_offset and vector_offset"):
        both(_table(10, 6))

    @nki.jit
    def chained(table):
        it = nl.ndarray((1, 1), dtype=nl.int32, buffer=nl.sbuf)
        return table.ap([[6, 1], [1, 6]], 0, scalar_offset=it, indirect_dim=0)[0:1, 0:2]

    with pytest.raises(ValueError, match=r"indexing of a view with a runtime offset"):
        chained(_table(10, 6))


@nki.jit
def doubled_rows(a):
    """Each row read and written through the device loop's index register as ``scalar_offset``."""
    n, d = a.shape
    out = nl.ndarray((n, d), dtype=a.dtype, buffer=nl.shared_hbm)
    t = nl.ndarray((1, d), dtype=a.dtype, buffer=nl.sbuf)
    for i in nl.dynamic_range(n):
        nisa.dma_copy(dst=t, src=a.ap([[d, 1], [1, d]], 0, scalar_offset=i, indirect_dim=0))
        nisa.tensor_scalar(dst=t, data=t, op0=nl.multiply, operand0=2.0)
        nisa.dma_copy(dst=out.ap([[d, 1], [1, d]], 0, scalar_offset=i, indirect_dim=0), src=t)
    return out


def test_a_register_is_a_scalar_offset() -> None:
    a = _table(6, 4)
    np.testing.assert_array_equal(doubled_rows(a), 2 * a)
    assert "scalar_offset=r" in nki_round_trip(doubled_rows, a)

    @nki.jit
    def register_as_vector_offset(table):
        r = nisa.register_alloc(x=1)
        return table.ap([[6, 2], [1, 6]], 0, vector_offset=r, indirect_dim=0)

    with pytest.raises(TypeError, match=r"vector_offset must be an SBUF tile, got VirtualRegister"):
        register_as_vector_offset(_table(10, 6))


@nki.jit
def select_expert_block(weights, idx):
    """``weights[e]`` seen as 8 partitions of (3 rows of 16, first 8 of each): a runtime offset on
    a pattern with two free dims (AWS's MoE kernels load an expert's weight tile so)."""
    w = weights.shape[2]
    out = nl.ndarray((8, 3, 8), dtype=weights.dtype, buffer=nl.shared_hbm)
    it = nl.ndarray((1, 1), dtype=nl.int32, buffer=nl.sbuf)
    nisa.dma_copy(dst=it, src=idx)
    tile = nl.ndarray((8, 3, 8), dtype=weights.dtype, buffer=nl.sbuf)
    view = weights.ap(
        pattern=[[3 * w, 8], [w, 3], [1, 8]], offset=0, scalar_offset=it.ap([[1, 1], [1, 1]], offset=0)
    )
    nisa.dma_copy(dst=tile, src=view)
    nisa.dma_copy(dst=out, src=tile)
    return out


@pytest.mark.parametrize("expert", [0, 2])
def test_a_runtime_offset_keeps_every_free_dim_of_the_pattern(expert: int) -> None:
    weights = np.arange(4 * 24 * 16, dtype=np.float32).reshape(4, 24, 16)
    got = nki.simulate(select_expert_block)(weights, np.array([[expert]], np.int32))
    np.testing.assert_array_equal(got, weights[expert].reshape(8, 3, 16)[:, :, :8])

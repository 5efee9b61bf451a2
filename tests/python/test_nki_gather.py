"""The frontend arms of ``nisa.dma_transpose``, ``nisa.local_gather`` and ``nisa.nc_n_gather``
and the ``nl`` functions lowered to them (``nl.load_transpose2d``, ``nl.gather_flattened``):
each runs an NKI-Python kernel against NumPy, emits NKI source that traces back to the same
program, and its bad inputs raise the right error naming the call."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
import torch

import torch_nki.nki.isa as nisa
import torch_nki.nki.language as nl
from torch_nki import nki
from torch_nki.errors import SimulationError, TraceError, ValidationError

from refs import nki_round_trip


def _rand(*shape: int, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).uniform(-10, 10, shape).astype(np.float32)


AXES = {2: (1, 0), 3: (2, 1, 0), 4: (3, 1, 2, 0)}


@nki.jit
def transposed_from_hbm(x):
    """``x`` (2-D, 3-D or 4-D) transposed straight from HBM into SBUF."""
    axes = AXES[len(x.shape)]
    shape = tuple(x.shape[a] for a in axes)
    out = nl.ndarray(shape, dtype=x.dtype, buffer=nl.shared_hbm)
    t = nl.ndarray(shape, dtype=x.dtype, buffer=nl.sbuf)
    nisa.dma_transpose(dst=t, src=x, axes=axes)
    nl.store(out, value=t)
    return out


@nki.jit
def transposed_in_sbuf(x):
    """``x`` loaded into SBUF as it is shaped, then transposed SBUF to SBUF."""
    axes = AXES[len(x.shape)]
    shape = tuple(x.shape[a] for a in axes)
    out = nl.ndarray(shape, dtype=x.dtype, buffer=nl.shared_hbm)
    t = nl.load(x)
    y = nl.ndarray(shape, dtype=x.dtype, buffer=nl.sbuf)
    nisa.dma_transpose(dst=y, src=t)
    nl.store(out, value=y)
    return out


@pytest.mark.parametrize("shape", [(16, 128), (200, 12), (3, 5, 4), (2, 3, 4, 5)])
def test_dma_transpose_matches_numpy_from_hbm_and_sbuf(shape: tuple[int, ...]) -> None:
    x = _rand(*shape)
    want = np.transpose(x, AXES[len(shape)])
    np.testing.assert_array_equal(nki.simulate(transposed_from_hbm)(x), want)
    if shape[0] <= 128:
        np.testing.assert_array_equal(nki.simulate(transposed_in_sbuf)(x), want)
    xb = torch.from_numpy(x).to(torch.bfloat16)
    got = transposed_from_hbm(xb)
    assert got.dtype == torch.bfloat16
    torch.testing.assert_close(got, xb.permute(*AXES[len(shape)]), rtol=0, atol=0)


def test_dma_transpose_emits_and_traces_back() -> None:
    source = nki_round_trip(transposed_from_hbm, _rand(16, 8))
    assert "nisa.dma_transpose(dst=t0, src=x[0:16, 0:8], axes=(1, 0))" in source
    source = nki_round_trip(transposed_in_sbuf, _rand(2, 3, 4, 5))
    assert (
        "nisa.dma_transpose(dst=t1.reshape((5, 3, 4, 2)), src=t0.reshape((2, 3, 4, 5)), axes=(3, 1, 2, 0))"
        in source
    )
    source = nki_round_trip(transposed_from_hbm, _rand(2, 3, 4))
    assert "src=x.ap(pattern=[[12, 2], [4, 3], [1, 4]], offset=0), axes=(2, 1, 0))" in source


def _transpose(body: Any, target: str = "trn2", dtype: Any = np.float32) -> Any:
    """A kernel running ``body(dst, x)`` on a (16, 8) input and its (8, 16) transposed tile."""

    @nki.jit(target=target)
    def k(x):
        out = nl.ndarray((8, 16), dtype=x.dtype, buffer=nl.shared_hbm)
        t = nl.ndarray((8, 16), dtype=x.dtype, buffer=nl.sbuf)
        nisa.memset(dst=t, value=0.0)
        body(t, x)
        nl.store(out, value=t)
        return out

    return lambda: nki.simulate(k)(_rand(16, 8).astype(dtype))


def test_dma_transpose_keywords() -> None:
    x16 = torch.from_numpy(_rand(16, 8)).to(torch.bfloat16)

    @nki.jit(target="trn3")
    def hwdge(x):
        out = nl.ndarray((8, 16), dtype=x.dtype, buffer=nl.shared_hbm)
        t = nl.ndarray((8, 16), dtype=x.dtype, buffer=nl.sbuf)
        nisa.dma_transpose(dst=t, src=x, axes=(1, 0), priority=0, dge_mode=nisa.dge_mode.hwdge)
        nl.store(out, value=t)
        return out

    torch.testing.assert_close(hwdge(x16), x16.T, rtol=0, atol=0)
    source = nki_round_trip(hwdge, x16, target="trn3")
    assert "axes=(1, 0), priority=0, dge_mode=nisa.dge_mode.hwdge)" in source
    with pytest.raises(ValidationError, match=r"dma_transpose with dge_mode=hwdge moves 2-byte elements"):
        _transpose(lambda t, x: nisa.dma_transpose(dst=t, src=x, dge_mode=nisa.dge_mode.hwdge))()
    with pytest.raises(ValidationError, match=r"takes dge_mode unknown or hwdge \(or none\), got swdge"):
        _transpose(lambda t, x: nisa.dma_transpose(dst=t, src=x, dge_mode=nisa.dge_mode.swdge))()
    with pytest.raises(ValidationError, match=r"oob_mode=skip is only valid for an indirect source"):
        _transpose(lambda t, x: nisa.dma_transpose(dst=t, src=x, oob_mode=nisa.oob_mode.skip))()
    with pytest.raises(ValidationError, match=r"priority=1 needs NeuronCore-v4 \(Trn3\) or newer; trn2"):
        _transpose(lambda t, x: nisa.dma_transpose(dst=t, src=x, priority=1))()


def test_dma_transpose_errors_name_the_call() -> None:
    with pytest.raises(ValidationError, match=r"dma_transpose needs NeuronCore-v3"):
        _transpose(lambda t, x: nisa.dma_transpose(dst=t, src=x), target="trn1")()
    with pytest.raises(TraceError, match=r"dma_transpose: axes=\[0, 1\] for a 2-D src"):
        _transpose(lambda t, x: nisa.dma_transpose(dst=t, src=x, axes=(0, 1)))()
    with pytest.raises(TypeError, match=r"nisa.dma_transpose: axes must be a tuple of ints"):
        _transpose(lambda t, x: nisa.dma_transpose(dst=t, src=x, axes=("a", "b")))()
    with pytest.raises(TraceError, match=r"dma_transpose: priority is 7; DMA priorities are 0..=3"):
        _transpose(lambda t, x: nisa.dma_transpose(dst=t, src=x, priority=7), target="trn3")()
    with pytest.raises(ValueError, match=r"priority must not be negative"):
        _transpose(lambda t, x: nisa.dma_transpose(dst=t, src=x, priority=-1), target="trn3")()
    with pytest.raises(
        TraceError, match=r"dma_transpose: dst has shape \[8, 8\] but src \[16, 8\] transposed"
    ):
        _transpose(lambda t, x: nisa.dma_transpose(dst=t[:, 0:8], src=x))()

    def to_bf16(t: Any, x: Any) -> None:
        y = nl.ndarray((8, 16), dtype=nl.bfloat16, buffer=nl.sbuf)
        nisa.dma_transpose(dst=y, src=x)
        nisa.tensor_copy(dst=t, src=y)

    with pytest.raises(ValidationError, match=r"dma_transpose does not convert: src is f32 but dst"):
        _transpose(to_bf16)()


@nki.jit
def loaded_transposed(x):
    """``nl.load_transpose2d`` of ``x``, in its dtype and cast to bfloat16."""
    n, m = x.shape
    out = nl.ndarray((m, 2 * n), dtype=nl.float32, buffer=nl.shared_hbm)
    t = nl.load_transpose2d(x)
    b = nl.load_transpose2d(x, dtype=nl.bfloat16)
    nl.store(out[:, 0:n], value=t)
    wide = nl.ndarray((m, n), dtype=nl.float32, buffer=nl.sbuf)
    nisa.tensor_copy(dst=wide, src=b)
    nl.store(out[:, n : 2 * n], value=wide)
    return out


def test_load_transpose2d_lowers_to_dma_transpose() -> None:
    x = _rand(256, 64)
    got = nki.simulate(loaded_transposed)(x)
    np.testing.assert_array_equal(got[:, :256], x.T)
    bf16 = torch.from_numpy(x.T.copy()).to(torch.bfloat16).float().numpy()
    np.testing.assert_array_equal(got[:, 256:], bf16)
    source = nki_round_trip(loaded_transposed, _rand(32, 16))
    assert "nisa.dma_transpose(dst=t0, src=x[0:32, 0:16], axes=(1, 0))" in source
    assert "nisa.tensor_copy(" in source


def test_load_transpose2d_errors() -> None:
    def kernel(body: Any, target: str = "trn2") -> Any:
        @nki.jit(target=target)
        def k(x):
            out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
            body(x)
            nl.store(out, value=nl.load(x))
            return out

        return nki.simulate(k)

    with pytest.raises(ValidationError, match=r"dma_transpose needs NeuronCore-v3"):
        kernel(nl.load_transpose2d, target="trn1")(_rand(8, 8))
    with pytest.raises(TypeError, match=r"nl.load_transpose2d takes an HBM tensor or view"):
        kernel(lambda x: nl.load_transpose2d(nl.load(x)))(_rand(8, 8))
    with pytest.raises(ValueError, match=r"nl.load_transpose2d transposes a 2-D view, got shape \(2, 4, 4\)"):
        kernel(nl.load_transpose2d)(_rand(2, 4, 4))


@nki.jit
def gathered_locally(src, index, num_elem_per_idx, num_valid_indices):
    """The docs' local_gather example: (128, 512, 4) by (128, 4) uint16 offsets."""
    p = src.shape[0]
    out = nl.ndarray(
        (p, num_valid_indices // 16, 16, num_elem_per_idx), dtype=src.dtype, buffer=nl.shared_hbm
    )
    s = nl.load(src)
    i = nl.load(index)
    t = nl.ndarray(out.shape, dtype=src.dtype, buffer=nl.sbuf)
    nisa.local_gather(
        dst=t, src_buffer=s, index=i, num_elem_per_idx=num_elem_per_idx, num_valid_indices=num_valid_indices
    )
    nl.store(out, value=t)
    return out


def _local_reference(src: np.ndarray, index: np.ndarray, n: int, valid: int) -> np.ndarray:
    """Each core's offsets, its 16 partitions of ``index`` column by column; every partition of
    the core takes ``n`` elements at each."""
    flat = src.reshape(src.shape[0], -1)
    out = np.empty((src.shape[0], valid * n), dtype=src.dtype)
    for core in range(src.shape[0] // 16):
        rows = slice(16 * core, 16 * core + 16)
        offsets = index[rows].T.reshape(-1)[:valid]
        for r in range(16 * core, 16 * core + 16):
            out[r] = np.concatenate([flat[r, o : o + n] for o in offsets])
    return out


def test_local_gather_matches_the_docs_reference() -> None:
    rng = np.random.default_rng(3)
    src = _rand(128, 512, 4)
    per_core = rng.integers(0, 512, size=(16, 4)).astype(np.uint16)
    index = (np.tile(per_core, (8, 1)) * 4).astype(np.uint16)
    got = nki.simulate(gathered_locally)(src, index, 4, 64)
    assert got.shape == (128, 4, 16, 4)
    np.testing.assert_array_equal(got.reshape(128, -1), _local_reference(src, index, 4, 64))
    # Different offsets per core.
    index = (rng.integers(0, 512, size=(128, 4)) * 4).astype(np.uint16)
    got = nki.simulate(gathered_locally)(src, index, 4, 48)
    np.testing.assert_array_equal(got.reshape(128, -1), _local_reference(src, index, 4, 48))
    source = nki_round_trip(gathered_locally, src[:32, :16], index[:32] % 64, 2, 32)
    assert (
        "nisa.local_gather(dst=t2, src_buffer=t0, index=t1, num_elem_per_idx=2, num_valid_indices=32)"
        in source
    )


@nki.jit
def gathered(data, indices):
    """``nisa.nc_n_gather`` and ``nl.gather_flattened`` (also cast to bfloat16) of ``data``."""
    p, k = indices.shape
    out = nl.ndarray((p, 3 * k), dtype=nl.float32, buffer=nl.shared_hbm)
    d, i = nl.load(data), nl.load(indices)
    t = nl.ndarray((p, k), dtype=data.dtype, buffer=nl.sbuf)
    nisa.nc_n_gather(dst=t, data=d, indices=i)
    nl.store(out[:, 0:k], value=t)
    nl.store(out[:, k : 2 * k], value=nl.gather_flattened(data=d, indices=i))
    b = nl.gather_flattened(d, i, dtype=nl.bfloat16)
    wide = nl.ndarray((p, k), dtype=nl.float32, buffer=nl.sbuf)
    nisa.tensor_copy(dst=wide, src=b)
    nl.store(out[:, 2 * k : 3 * k], value=wide)
    return out


def test_nc_n_gather_and_gather_flattened_match_take_along_axis() -> None:
    data = _rand(32, 64)
    # The docs' example: every fifth element.
    indices = np.tile(np.arange(10, dtype=np.uint32) * 5, (32, 1))
    got = nki.simulate(gathered)(data, indices)
    want = np.take_along_axis(data, indices.astype(np.int64), axis=-1)
    np.testing.assert_array_equal(got[:, 0:10], want)
    np.testing.assert_array_equal(got[:, 10:20], want)
    np.testing.assert_array_equal(got[:, 20:30], torch.from_numpy(want).to(torch.bfloat16).float().numpy())
    indices = np.random.default_rng(5).integers(0, 64, size=(32, 100)).astype(np.uint32)
    got = nki.simulate(gathered)(data, indices)
    np.testing.assert_array_equal(got[:, 0:100], np.take_along_axis(data, indices.astype(np.int64), axis=-1))
    source = nki_round_trip(gathered, data[:8], indices[:8, :4])
    assert "nisa.nc_n_gather(dst=t2, data=t0, indices=t1)" in source


def _gather(body: Any) -> Any:
    @nki.jit
    def k(data, indices):
        out = nl.ndarray(indices.shape, dtype=data.dtype, buffer=nl.shared_hbm)
        d, i = nl.load(data), nl.load(indices)
        nl.store(out, value=body(d, i))
        return out

    return nki.simulate(k)


def test_gather_errors_name_the_call() -> None:
    data = _rand(16, 32)
    u32 = np.zeros((16, 4), dtype=np.uint32)
    with pytest.raises(ValidationError, match=r"nc_n_gather: indices t1 is i32; its indices must be uint32"):
        _gather(nl.gather_flattened)(data, u32.astype(np.int32))
    u32[3, 2] = 32
    with pytest.raises(SimulationError, match=r"indices\[3, 2\] is 32; it must be in 0..32"):
        _gather(nl.gather_flattened)(data, u32)
    with pytest.raises(NotImplementedError, match=r"nl.gather_flattened\(axis=1\)"):
        _gather(lambda d, i: nl.gather_flattened(d, i, axis=1))(data, u32)
    with pytest.raises(TypeError, match=r"nl.gather_flattened: data must be a tile"):
        _gather(lambda d, i: nl.gather_flattened(3.0, i))(data, u32)

    def local(d: Any, i: Any, n: int = 1, valid: Any = None, dtype: Any = None) -> Any:
        size = 64 * n if valid is None or valid < 0 else valid * n
        out = nl.ndarray((16, size), dtype=dtype or d.dtype, buffer=nl.sbuf)
        nisa.local_gather(dst=out, src_buffer=d, index=i, num_elem_per_idx=n, num_valid_indices=valid)
        return out[:, 0:4]

    with pytest.raises(ValidationError, match=r"local_gather: index t1 is u32; its indices must be uint16"):
        _gather(local)(data, np.zeros((16, 4), dtype=np.uint32))
    u16 = np.zeros((16, 4), dtype=np.uint16)
    with pytest.raises(ValidationError, match=r"local_gather: num_elem_per_idx is 3"):
        _gather(lambda d, i: local(d, i, n=3))(data, u16)
    with pytest.raises(ValidationError, match=r"local_gather writes src_buffer's dtype unconverted"):
        _gather(lambda d, i: local(d, i, dtype=nl.bfloat16))(data, u16)
    with pytest.raises(TraceError, match=r"local_gather: dst has 8 elements per partition but 10 indices"):

        def short(d: Any, i: Any) -> Any:
            out = nl.ndarray((16, 8), dtype=d.dtype, buffer=nl.sbuf)
            nisa.local_gather(dst=out, src_buffer=d, index=i, num_valid_indices=10)
            return out[:, 0:4]

        _gather(short)(data, u16)
    with pytest.raises(ValueError, match=r"num_valid_indices must not be negative"):
        _gather(lambda d, i: local(d, i, valid=-2))(data, u16)

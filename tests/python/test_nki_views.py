"""Strided tile views in the NKI frontend: step slices, ``tile.ap(...)``, ``permute``,
``broadcast`` and the other NkiTensor view methods, and ``nl.broadcast_to`` of a tile, each
checked against NumPy on values, plus the errors NKI's access-pattern rules give."""

from __future__ import annotations

import numpy as np
import pytest

import torch_nki.nki.isa as nisa
import torch_nki.nki.language as nl
from torch_nki import nki
from torch_nki.errors import ValidationError

from refs import nki_round_trip


def _rand(*shape: int, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).uniform(-1, 1, shape).astype(np.float32)


@nki.jit
def split_even_odd(x):
    p, f = x.shape
    even = nl.ndarray((p, f - f // 2), dtype=x.dtype, buffer=nl.shared_hbm)
    odd = nl.ndarray((p, f // 2), dtype=x.dtype, buffer=nl.shared_hbm)
    t = nl.load(x)
    nl.store(even, value=t[:, 0:f:2])
    nl.store(odd, value=t[:, 1:f:2])
    return even, odd


def test_step_slices_read_every_other_element() -> None:
    x = _rand(5, 9)
    even, odd = split_even_odd(x)
    np.testing.assert_array_equal(even, x[:, 0::2])
    np.testing.assert_array_equal(odd, x[:, 1::2])
    assert ".ap(pattern=[[9, 5], [2, 5]], offset=0)" in nki_round_trip(split_even_odd, x)


@nki.jit
def pool_max(x, pool):
    c, h, w = x.shape
    out = nl.ndarray((c, h // pool, w // pool), dtype=x.dtype, buffer=nl.shared_hbm)
    t = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=x)
    windows = t.ap([[h * w, c], [pool * w, h // pool], [pool, w // pool], [w, pool], [1, pool]])
    nisa.dma_copy(dst=out, src=nl.max(windows, axis=[3, 4]))
    return out


def test_an_access_pattern_walks_pooling_windows() -> None:
    x = _rand(3, 6, 8)
    got = pool_max(x, 2)
    np.testing.assert_array_equal(got, x.reshape(3, 3, 2, 4, 2).max(axis=(2, 4)))
    assert "axis=(1, 2)" in nki_round_trip(pool_max, x, 2)


@nki.jit
def strided_writes(x):
    """Writes through views: a column of a 3-D tile, then a permuted view, in place."""
    p, a, b = x.shape
    out = nl.ndarray((p, b, a), dtype=x.dtype, buffer=nl.shared_hbm)
    t = nl.ndarray((p, a, b), dtype=x.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=x)
    nisa.memset(dst=t[:, :, 0], value=7.0)
    nisa.tensor_scalar(dst=t[:, 1::2, :], data=t[:, 1::2, :], op0=nl.multiply, operand0=-1.0)
    swapped = nl.ndarray((p, b, a), dtype=x.dtype, buffer=nl.sbuf)
    nisa.tensor_copy(dst=swapped, src=t.permute((0, 2, 1)))
    nisa.dma_copy(dst=out, src=swapped)
    return out


def test_writes_through_strided_views_touch_only_their_elements() -> None:
    x = _rand(4, 5, 3)
    want = x.copy()
    want[:, :, 0] = 7.0
    want[:, 1::2, :] *= -1.0
    np.testing.assert_array_equal(strided_writes(x), want.transpose(0, 2, 1))
    nki_round_trip(strided_writes, x)


@nki.jit
def broadcasts(a, row):
    p, f = a.shape
    out = nl.ndarray((p, f), dtype=a.dtype, buffer=nl.shared_hbm)
    cols = nl.ndarray((p, f), dtype=a.dtype, buffer=nl.shared_hbm)
    ta = nl.load(a)
    tr = nl.ndarray((1, f), dtype=a.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=tr, src=row)
    everywhere = nl.broadcast_to(tr, (p, f))  # one partition to p: a DMA
    prod = nl.ndarray((p, f), dtype=a.dtype, buffer=nl.sbuf)
    nisa.tensor_tensor(dst=prod, data1=ta, data2=everywhere, op=nl.multiply)
    nl.store(out, prod)
    first = ta[:, 0:1]
    repeated = nl.broadcast_to(first, (p, f))  # a free dim: a view with stride 0
    nl.store(cols, repeated)
    return out, cols


def test_broadcast_to_repeats_partitions_and_free_elements() -> None:
    a, row = _rand(6, 10), _rand(1, 10, seed=1)
    out, cols = broadcasts(a, row)
    np.testing.assert_array_equal(out, a * row)
    np.testing.assert_array_equal(cols, np.repeat(a[:, :1], 10, axis=1))
    assert "[[0, 6], [1, 10]]" in nki_round_trip(broadcasts, a, row)


def test_view_methods_follow_the_nki_tensor_api() -> None:
    seen: dict[str, object] = {}

    @nki.jit
    def views(x):
        t = nl.ndarray((4, 2, 3), dtype=nl.float32, buffer=nl.sbuf)
        seen["pattern"] = t.get_pattern()
        seen["slice"] = t.slice(1, 0, 2, 1).get_pattern()
        seen["step"] = t[:, :, 0:3:2].get_pattern()
        seen["permuted"] = (t.permute((0, 2, 1)).shape, t.permute((0, 2, 1)).is_contiguous())
        seen["expanded"] = t.expand_dim(1).shape
        seen["broadcast"] = t.expand_dim(1).broadcast(1, 5).get_pattern()
        seen["squeezed"] = t[:, 0:1, :].squeeze_dim(1).shape
        seen["selected"] = t.select(2, 1).get_pattern()
        seen["ap"] = (t.ap([[6, 4], [1, 3]], offset=3).offset, t.ap([[6, 4], [1, 3]], offset=3).shape)
        out = nl.ndarray((4, 2), dtype=x.dtype, buffer=nl.shared_hbm)
        nisa.dma_copy(dst=out, src=x)
        return out

    views(_rand(4, 2))
    assert seen == {
        "pattern": [[6, 4], [3, 2], [1, 3]],
        "slice": [[6, 4], [3, 2], [1, 3]],
        "step": [[6, 4], [3, 2], [2, 2]],
        "permuted": ((4, 3, 2), False),
        "expanded": (4, 1, 2, 3),
        "broadcast": [[6, 4], [0, 5], [3, 2], [1, 3]],
        "squeezed": (4, 3),
        "selected": [[6, 4], [3, 2]],
        "ap": (3, (4, 3)),
    }


def test_access_pattern_rules_are_errors_at_the_line() -> None:
    @nki.jit
    def every_other_partition(x):
        t = nl.ndarray((16, 32), dtype=nl.float32, buffer=nl.sbuf)
        return t.ap([[64, 8], [1, 32]])

    with pytest.raises(ValueError, match=r"partition entry's step must be the tile's free size 32") as info:
        every_other_partition(_rand(4, 2))
    assert "test_nki_views.py" in str(info.value)

    @nki.jit
    def outside(x):
        out = nl.ndarray((4, 5), dtype=nl.float32, buffer=nl.shared_hbm)
        t = nl.ndarray((4, 8), dtype=nl.float32, buffer=nl.sbuf)
        view = t.ap([[8, 4], [2, 5]])
        nl.store(out, value=view)
        return out

    with pytest.raises(IndexError, match=r"reaches outside tile .*\(made at .*, used at .*test_nki_views.py"):
        outside(_rand(4, 2))

    @nki.jit
    def outside_never_used(x):
        # A view the kernel builds for an iteration its own `if` then skips (AWS's kernels do).
        out = nl.ndarray((4, 8), dtype=nl.float32, buffer=nl.shared_hbm)
        t = nl.load(x)
        for i in range(2):
            view = t.ap([[8, 4], [1, 8]], offset=i * 8)
            if i < 1:
                nl.store(out, value=view)
        return out

    x = _rand(4, 8)
    np.testing.assert_array_equal(outside_never_used(x), x)

    @nki.jit
    def partition_step(x):
        t = nl.ndarray((8, 4), dtype=nl.float32, buffer=nl.sbuf)
        return t[0:8:2, :]

    with pytest.raises(ValueError, match=r"partition slice has step 1, got step 2"):
        partition_step(_rand(4, 2))

    @nki.jit
    def broadcast_to_an_engine(x):
        out = nl.ndarray((4, 8), dtype=x.dtype, buffer=nl.shared_hbm)
        t = nl.ndarray((1, 8), dtype=nl.float32, buffer=nl.sbuf)
        nisa.memset(dst=t, value=1.0)
        r = nl.ndarray((4, 8), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_copy(dst=r, src=t.partition_broadcast(4))
        nisa.dma_copy(dst=out, src=r)
        return out

    with pytest.raises(ValidationError, match=r"only be read by a DMA") as v:
        broadcast_to_an_engine(_rand(4, 8))
    assert v.value.rule == "tile-partition-broadcast"

    @nki.jit
    def dynamic(x):
        t = nl.ndarray((4, 8), dtype=nl.float32, buffer=nl.sbuf)
        return t.ap([[8, 4], [1, 8]], scalar_offset=t[0:1, 0:1])

    with pytest.raises(NotImplementedError, match=r"scalar_offset"):
        dynamic(_rand(4, 2))


@nki.jit
def hbm_walks(x, row):
    """Loads ``row`` repeated along a middle dim (a stride-0 dim between two others) and stores
    ``x`` with its two free dims swapped: HBM patterns no single stride covers."""
    p, a, b = x.shape
    repeated = nl.ndarray((p, a, b), dtype=x.dtype, buffer=nl.shared_hbm)
    swapped = nl.ndarray((p, b, a), dtype=x.dtype, buffer=nl.shared_hbm)
    t = nl.ndarray((p, a, b), dtype=x.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=row.ap([[0, p], [0, a], [1, b]]))
    nisa.dma_copy(dst=repeated, src=t)
    u = nl.ndarray((p, a, b), dtype=x.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=u, src=x)
    nisa.dma_copy(dst=swapped.ap([[a * b, p], [1, a], [a, b]]), src=u)
    return repeated, swapped


def test_hbm_patterns_with_several_free_dims_move_every_element() -> None:
    x, row = _rand(3, 4, 5), _rand(1, 5, seed=2)
    repeated, swapped = hbm_walks(x, row)
    np.testing.assert_array_equal(repeated, np.broadcast_to(row.reshape(1, 1, 5), (3, 4, 5)))
    np.testing.assert_array_equal(swapped, x.transpose(0, 2, 1))
    source = nki_round_trip(hbm_walks, x, row)
    assert "row.ap(pattern=[[0, 3], [0, 4], [1, 5]], offset=0)" in source

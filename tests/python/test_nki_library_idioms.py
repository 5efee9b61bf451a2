"""NKI 0.7 idioms AWS's kernel library leans on: kernels calling kernels, ``tensor.buffer``,
``dma_copy`` between shapes of one element count, the deprecated engine constants, and uint32
index outputs."""

from __future__ import annotations

import numpy as np
import pytest

import torch_nki.nki.isa as nisa
import torch_nki.nki.language as nl
from torch_nki import nki
from torch_nki.errors import TraceError, ValidationError


@nki.jit
def scale_into(x, out, factor):
    """A kernel other kernels call: ``out = x * factor``."""
    nl.store(out, value=nl.multiply(nl.load(x), factor))
    return out


def test_a_kernel_called_from_a_kernel_runs_inline() -> None:
    @nki.jit
    def outer(x):
        out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
        return scale_into(x, out, 3.0)

    x = np.arange(8, dtype=np.float32).reshape(2, 4)
    np.testing.assert_array_equal(outer(x), 3 * x)

    @nki.jit
    def launches(x):
        out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
        return scale_into[2](x, out, 3.0)

    with pytest.raises(NotImplementedError, match=r"kernel scale_into launched on a grid \(2,\) from inside"):
        launches(x)


def test_tensors_name_their_buffer() -> None:
    seen = {}

    @nki.jit
    def probe(x):
        t = nl.load(x)
        p = nl.ndarray((2, 4), dtype=nl.float32, buffer=nl.psum)
        seen.update(x=x.buffer, view=x[0:1, :].buffer, t=t.buffer, region=t[0:1, :].buffer, p=p.buffer)
        out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
        nl.store(out, value=t)
        return out

    probe(np.zeros((2, 4), np.float32))
    assert seen == {"x": nl.shared_hbm, "view": nl.shared_hbm, "t": nl.sbuf, "region": nl.sbuf, "p": nl.psum}
    assert seen["p"] == "psum" and seen["t"] != nl.psum


def test_dma_copy_needs_only_equal_element_counts() -> None:
    @nki.jit
    def column(x):
        t = nl.ndarray((8, 1), dtype=nl.float32, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=x[2:10])  # a (8,) slice into an (8, 1) tile
        out = nl.ndarray((8,), dtype=nl.float32, buffer=nl.shared_hbm)
        nisa.dma_copy(dst=out, src=t)
        return out

    x = np.arange(12, dtype=np.float32)
    np.testing.assert_array_equal(column(x), x[2:10])

    @nki.jit
    def mismatched(x):
        t = nl.ndarray((4, 1), dtype=nl.float32, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=x[0:8])
        return x

    with pytest.raises(TraceError, match="dma_copy: dst has shape"):
        mismatched(x)


def test_the_deprecated_engine_constants_are_the_engines() -> None:
    assert nisa.scalar_engine is nisa.engine.scalar and nisa.vector_engine is nisa.engine.vector
    assert nisa.tensor_engine is nisa.engine.tensor and nisa.gpsimd_engine is nisa.engine.gpsimd
    assert nisa.unknown_engine is nisa.engine.unknown
    with pytest.raises(AttributeError, match=r"NKI 0\.7 has no nisa\.sync_engine"):
        _ = nisa.sync_engine
    assert isinstance(nisa.dma_engine, type)


def test_top8_indices_go_to_a_uint32_tile() -> None:
    @nki.jit
    def top8(x):
        t = nl.load(x)
        values = nl.ndarray((x.shape[0], 8), dtype=nl.float32, buffer=nl.sbuf)
        index = nl.ndarray((x.shape[0], 8), dtype=nl.uint32, buffer=nl.sbuf)
        nisa.max8(dst=values, src=t)
        nisa.nc_find_index8(dst=index, data=t, vals=values)
        out = nl.ndarray((x.shape[0], 8), dtype=nl.uint32, buffer=nl.shared_hbm)
        nl.store(out, value=index)
        return out

    x = np.random.default_rng(0).permutation(64).astype(np.float32).reshape(4, 16)
    got = nki.jit(top8.fn, target="trn2")(x)
    np.testing.assert_array_equal(got, np.argsort(-x, axis=1)[:, :8].astype(np.uint32))


def test_integer_enums_compare_with_ints_and_ints_name_members() -> None:
    assert nisa.nc_version.gen3 >= 3 and nisa.nc_version.gen2 < nisa.nc_version.gen3
    assert nisa.dge_mode.none == 3 and not isinstance(nisa.matmul_perf_mode.none, int)
    seen = []

    @nki.jit
    def copy(x):
        seen.append(nisa.get_nc_version() >= 3)
        t = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=x, dge_mode=3)
        out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
        nisa.dma_copy(dst=out, src=t)
        return out

    x = np.arange(8, dtype=np.float32).reshape(2, 4)
    program = nki.jit(copy.fn, target="trn2").trace(x)
    assert seen == [True]
    assert program.instruction_count() == 2

    @nki.jit
    def bad(x):
        t = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=x, dge_mode=7)
        return x

    with pytest.raises(TypeError, match=r"nisa.dma_copy: dge_mode must be a nisa.dge_mode value, got 7"):
        bad(x)


@pytest.mark.parametrize("op", ["add", "maximum", "bitwise_or"])
def test_tensor_reduce_over_the_last_free_dims_keeps_the_others(op: str) -> None:
    @nki.jit
    def rows(x):
        t = nl.ndarray((4, 3, 5), dtype=x.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=x)
        r = nl.ndarray((4, 3), dtype=x.dtype, buffer=nl.sbuf)
        nisa.tensor_reduce(dst=r, op=getattr(nl, op), data=t, axis=(2,))
        out = nl.ndarray((4, 3), dtype=x.dtype, buffer=nl.shared_hbm)
        nisa.dma_copy(dst=out, src=r)
        return out

    dtype = np.int32 if op == "bitwise_or" else np.float32
    x = np.random.default_rng(1).integers(0, 64, (4, 3, 5)).astype(dtype)
    reduce = {"add": np.add, "maximum": np.maximum, "bitwise_or": np.bitwise_or}[op]
    np.testing.assert_array_equal(rows(x), reduce.reduce(x, axis=2))
    program = rows.trace(x)
    source = program.emit()
    assert "data=t0.ap(pattern=[[15, 4], [5, 3], [1, 5]], offset=0), axis=(2,), keepdims=True" in source
    again = nki.trace(nki.load_source(source, "rows").rows, x)
    assert again.difference(program) is None


def test_tensor_reduce_refuses_axes_that_are_not_the_last_dims() -> None:
    @nki.jit
    def middle(x):
        t = nl.ndarray((4, 3, 5), dtype=x.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=x)
        r = nl.ndarray((4, 5), dtype=x.dtype, buffer=nl.sbuf)
        nisa.tensor_reduce(dst=r, op=nl.add, data=t, axis=(1,))
        return x

    with pytest.raises(NotImplementedError, match=r"nisa.tensor_reduce\(axis=\(1,\)\) on a \(4, 3, 5\) tile"):
        middle(np.zeros((4, 3, 5), np.float32))

    @nki.jit
    def uneven(x):
        t = nl.ndarray((4, 15), dtype=x.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=x)
        r = nl.ndarray((4, 4), dtype=x.dtype, buffer=nl.sbuf)
        nisa.tensor_reduce(dst=r, op=nl.add, data=t, axis=1)
        return x

    with pytest.raises(TraceError, match=r"number of elements per partition that divides data's 15"):
        uneven(np.zeros((4, 15), np.float32))


def _quarter_matmuls(position, size, target="trn2"):
    @nki.jit
    def quarters(a, b):
        # Four 32-row stationary tiles on the four row tiles of the PE array.
        sa = nl.ndarray((128, 16), dtype=a.dtype, buffer=nl.sbuf)
        sb = nl.ndarray((128, 8), dtype=b.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=sa, src=a)
        nisa.dma_copy(dst=sb, src=b)
        out = nl.ndarray((4, 16, 8), dtype=nl.float32, buffer=nl.shared_hbm)
        for q in range(4):
            acc = nl.ndarray((16, 8), dtype=nl.float32, buffer=nl.psum)
            rows = slice(32 * q, 32 * (q + 1))
            nisa.nc_matmul(
                dst=acc, stationary=sa[rows, :], moving=sb[rows, :], tile_position=position(q), tile_size=size
            )
            r = nl.ndarray((16, 8), dtype=nl.float32, buffer=nl.sbuf)
            nisa.tensor_copy(dst=r, src=acc)
            nisa.dma_copy(dst=out[q], src=r)
        return out

    return nki.jit(quarters.fn, target=target)


def test_nc_matmul_tiling_mode_gives_the_same_values_and_round_trips() -> None:
    rng = np.random.default_rng(2)
    a, b = rng.standard_normal((128, 16), np.float32), rng.standard_normal((128, 8), np.float32)
    want = np.stack([a[32 * q : 32 * (q + 1)].T @ b[32 * q : 32 * (q + 1)] for q in range(4)])
    kernel = _quarter_matmuls(lambda q: (32 * q, 0), (32, 128))
    np.testing.assert_allclose(kernel(a, b), want, rtol=1e-5, atol=1e-5)
    program = kernel.trace(a, b)
    source = program.emit()
    assert "tile_position=(96, 0), tile_size=(32, 128)" in source
    again = nki.trace(nki.load_source(source, "quarters").quarters, a, b)
    assert again.difference(program) is None


@pytest.mark.parametrize(
    ("position", "size", "target", "message"),
    [
        (lambda q: (32 * q, 0), (32, 128), "trn1", r"row_size is 32; on trn1 it must be one of \[64, 128\]"),
        (lambda q: (16, 0), (32, 128), "trn2", r"start_row is 16; it must be a multiple of row_size 32"),
        (lambda q: (0, 0), (32, 8), "trn2", r"tile_size's column_size is 8"),
        (lambda q: (0, 0), (32, 64), "trn2", None),
        (lambda q: (0, 64), (32, 64), "trn2", None),
    ],
)
def test_nc_matmul_tiling_is_checked(position, size, target, message) -> None:
    a, b = np.ones((128, 16), np.float32), np.ones((128, 8), np.float32)
    kernel = _quarter_matmuls(position, size, target)
    if message is None:
        np.testing.assert_array_equal(kernel(a, b), np.full((4, 16, 8), 32, np.float32))
        return
    with pytest.raises(ValidationError, match=message) as info:
        kernel(a, b)
    assert info.value.rule == "matmul-tiling"


def test_nc_matmul_tiling_needs_both_tuples() -> None:
    kernel = _quarter_matmuls(lambda q: (0, 0), ())
    with pytest.raises(TraceError, match=r"tile_position and tile_size are two-element tuples, both given"):
        kernel(np.ones((128, 16), np.float32), np.ones((128, 8), np.float32))


def test_nki_objects_keep_their_constructor_under_dataclass() -> None:
    import dataclasses

    @dataclasses.dataclass
    class Section(nl.NKIObject):
        index = None  # a plain class attribute, passed by keyword
        offset = None

    s = Section(index=3, offset=7)
    assert (s.index, s.offset) == (3, 7)

    @dataclasses.dataclass
    class Sizes(nl.NKIObject):
        rows: int
        unset: int  # required, but NKIObject leaves a field not given unset
        cols: int = 4
        names: list = dataclasses.field(default_factory=list)

        def __post_init__(self):
            self.area = self.rows * self.cols

    z = Sizes(2)
    assert (z.rows, z.cols, z.names, z.area) == (2, 4, [], 8) and not hasattr(z, "unset")
    assert Sizes(rows=3, cols=5).area == 15 and Sizes(3, 1) == Sizes(3, unset=1)
    with pytest.raises(TypeError, match=r"Sizes\(\) got multiple values for argument 'rows'"):
        Sizes(2, rows=3)
    with pytest.raises(TypeError, match=r"Sizes\(\) takes 4 positional argument"):
        Sizes(1, 2, [], 4, 5)

    class Own(nl.NKIObject):
        def __init__(self, x):
            self.x = x + 1

    assert Own(1).x == 2

"""``nisa.dma_compute`` through the frontend: sources in HBM and SBUF, of several dtypes and
layouts, summed element by element in fp32 and rounded once to the destination (SBUF or HBM,
which may also be a source); checked against NumPy. Then the round trip and the rules the docs
state (``nl.add`` only, unit scales, 16 sources, no PSUM) and the shape checks."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import torch_nki.nki.isa as nisa
import torch_nki.nki.language as nl
from torch_nki import nki
from torch_nki.errors import TraceError, ValidationError

from refs import nki_round_trip


@nki.jit
def three_way(a, b, c):
    """``a + b + c`` into a bf16 SBUF tile (``b`` loaded first, ``c`` read as ``a``'s shape),
    and ``a + out2`` accumulated in place in HBM."""
    out = nl.ndarray(a.shape, dtype=nl.bfloat16, buffer=nl.shared_hbm)
    b_sb = nl.load(b)
    dst = nl.ndarray(a.shape, dtype=nl.bfloat16, buffer=nl.sbuf)
    nisa.dma_compute(dst=dst, srcs=[a, b_sb, c.reshape(a.shape)], reduce_op=nl.add)
    nl.store(out, value=dst)
    out2 = nl.ndarray(a.shape, dtype=nl.float32, buffer=nl.shared_hbm)
    nl.store(out2, value=b_sb)
    nisa.dma_compute(out2, [out2, a], nl.add, scales=[1.0, 1.0])
    return out, out2


def _inputs() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(5)
    a = rng.standard_normal((8, 12)).astype(np.float32)
    b = rng.standard_normal((8, 12)).astype(np.float32)
    c = rng.standard_normal((12, 8)).astype(np.float32)
    return a, b, c


def test_dma_compute_sums_sources_in_fp32() -> None:
    a, b, c = _inputs()
    out, out2 = three_way(torch.from_numpy(a), torch.from_numpy(b), torch.from_numpy(c))
    want = torch.from_numpy(a + b + c.reshape(8, 12)).to(torch.bfloat16)
    assert torch.equal(out, want)
    np.testing.assert_array_equal(out2.numpy(), b + a)


def test_dma_compute_converts_integer_sources() -> None:
    @nki.jit
    def mixed(i, f):
        out = nl.ndarray(f.shape, dtype=nl.float32, buffer=nl.shared_hbm)
        nisa.dma_compute(out, [i, f], nl.add)
        return out

    i = np.arange(-6, 6, dtype=np.int32).reshape(3, 4)
    f = np.full((3, 4), 0.5, np.float32)
    np.testing.assert_array_equal(mixed(i, f), i.astype(np.float32) + f)


def test_dma_compute_round_trips_through_emitted_source() -> None:
    a, b, c = _inputs()
    source = nki_round_trip(three_way, a, b, c)
    assert "nisa.dma_compute(dst=t1, srcs=[a[0:8, 0:12], t0, " in source, source


def _rule(**kwargs: object) -> Exception:
    @nki.jit
    def k(a):
        out = nl.ndarray(a.shape, dtype=nl.float32, buffer=nl.shared_hbm)
        srcs = kwargs.get("srcs", [a, a])
        nisa.dma_compute(
            dst=kwargs.get("dst", out),
            srcs=srcs(a) if callable(srcs) else srcs,
            reduce_op=kwargs.get("reduce_op", nl.add),
            scales=kwargs.get("scales"),
        )
        return out

    with pytest.raises(Exception) as e:
        k(np.ones((4, 4), np.float32))
    return e.value


def test_the_documented_limits_are_validation_rules() -> None:
    e = _rule(reduce_op=nl.maximum)
    assert isinstance(e, ValidationError) and e.rule == "dma-compute-op"
    e = _rule(scales=[1.0, 0.5])
    assert isinstance(e, ValidationError) and e.rule == "dma-compute-scales"
    e = _rule(srcs=lambda a: [a] * 17)
    assert isinstance(e, ValidationError) and e.rule == "dma-compute-sources"

    def psum_src(a: object) -> list[object]:
        t = nl.ndarray((4, 4), dtype=nl.float32, buffer=nl.psum)
        return [a, t]

    e = _rule(srcs=psum_src)
    assert isinstance(e, ValidationError) and e.rule == "dma-psum"


def test_shapes_and_arguments_are_checked_at_the_call() -> None:
    e = _rule(srcs=lambda a: [a[0:2, :]])
    assert isinstance(e, TraceError) and "srcs[0] has 8 elements, dst 16" in str(e)
    e = _rule(srcs=[])
    assert isinstance(e, TraceError) and "srcs is empty" in str(e)
    e = _rule(scales=[1.0])
    assert isinstance(e, TraceError) and "1 scales for 2 sources" in str(e)
    e = _rule(dst=None)
    assert isinstance(e, TypeError)

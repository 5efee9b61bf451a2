"""Device-memory scratch: ``nl.private_hbm`` (``nl.hbm``) tensors and ``nl.shared_hbm``
tensors a kernel allocates but does not return. The simulator gives each zeroed storage for the
call; returning a private one is a trace error; codegen allocates them where NKI does."""

from __future__ import annotations

import numpy as np
import pytest

import torch_nki.nki.language as nl
from torch_nki import nki
from torch_nki.errors import TraceError


@nki.jit
def through_scratch(x, memory):
    """``out = 2 * x``, by way of a scratch tensor in ``memory``."""
    scratch = nl.ndarray(x.shape, dtype=x.dtype, buffer=memory)
    nl.store(scratch, value=nl.load(x))
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    nl.store(out, value=nl.multiply(nl.load(scratch), 2.0))
    return out


@pytest.mark.parametrize("memory", ["private_hbm", "hbm", "shared_hbm"])
def test_a_kernel_stores_into_scratch_and_loads_it_back(memory: str) -> None:
    x = np.arange(24, dtype=np.float32).reshape(4, 6)
    np.testing.assert_array_equal(through_scratch(x, getattr(nl, memory)), 2 * x)
    program = through_scratch.trace(x, getattr(nl, memory))
    assert len(program.outputs()) == 1


def test_hbm_is_private_hbm_and_scratch_names_its_buffer() -> None:
    assert nl.hbm is nl.private_hbm and nl.hbm == "private_hbm"
    seen = {}

    @nki.jit
    def probe(x):
        scratch = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.hbm)
        seen.update(scratch=scratch.buffer, view=scratch[0:1, :].buffer, name=scratch.name)
        out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
        nl.store(out, value=nl.load(x))
        return out

    probe(np.zeros((2, 4), np.float32))
    assert seen == {"scratch": nl.private_hbm, "view": nl.private_hbm, "name": "scratch0"}


def test_scratch_starts_zeroed_for_every_call() -> None:
    @nki.jit
    def accumulate_twice(x):
        scratch = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.private_hbm)
        nl.store(scratch, value=nl.add(nl.load(scratch), nl.load(x)))
        out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
        nl.store(out, value=nl.load(scratch))
        return out

    x = np.ones((2, 3), np.float32)
    np.testing.assert_array_equal(accumulate_twice(x), x)
    np.testing.assert_array_equal(accumulate_twice(x), x)


def test_each_program_of_a_grid_has_its_own_private_scratch() -> None:
    @nki.jit
    def halves(x):
        out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
        i = nl.program_id(0)
        rows = x.shape[0] // 2
        scratch = nl.ndarray((rows, x.shape[1]), dtype=x.dtype, buffer=nl.private_hbm)
        nl.store(scratch, value=nl.add(nl.load(x[i * rows : (i + 1) * rows, :]), float(i)))
        nl.store(out[i * rows : (i + 1) * rows, :], value=nl.load(scratch))
        return out

    x = np.arange(16, dtype=np.float32).reshape(4, 4)
    want = x + np.repeat([0.0, 1.0], 2)[:, None].astype(np.float32)
    np.testing.assert_array_equal(halves[2](x), want)


def test_returning_private_scratch_is_a_trace_error_at_its_allocation() -> None:
    @nki.jit
    def leaks(x):
        scratch = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.private_hbm)
        nl.store(scratch, value=nl.load(x))
        return scratch

    message = r"returned private_hbm tensor `scratch0`; outputs must be allocated with shared_hbm"
    with pytest.raises(TraceError, match=message):
        leaks(np.zeros((2, 2), np.float32))


def test_an_unknown_buffer_is_a_type_error() -> None:
    @nki.jit
    def bad(x):
        return nl.ndarray(x.shape, dtype=x.dtype, buffer="dram")

    message = r"buffer must be nl.sbuf, nl.psum, nl.private_hbm \(nl.hbm\) or nl.shared_hbm, got 'dram'"
    with pytest.raises(TypeError, match=message):
        bad(np.zeros((2, 2), np.float32))


@pytest.mark.parametrize("memory", ["private_hbm", "shared_hbm"])
def test_scratch_is_emitted_where_it_was_allocated_and_traces_back(memory: str) -> None:
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    program = through_scratch.trace(x, getattr(nl, memory))
    source = program.emit()
    assert f"buffer=nl.{memory})" in source
    shared = source.count("nl.ndarray((3, 4), dtype=nl.float32, buffer=nl.shared_hbm)")
    assert shared == (2 if memory == "shared_hbm" else 1)
    again = nki.trace(nki.load_source(source, "through_scratch").through_scratch, x)
    assert again.difference(program) is None


def test_every_declared_buffer_is_an_nl_buffer() -> None:
    from torch_nki.nki._spec import SPEC

    for declared in SPEC["buffers"]:
        buffer = getattr(nl, declared["name"])
        assert buffer == (declared["alias_of"] or declared["name"]), declared


def test_a_kernel_may_return_its_output_reshaped() -> None:
    @nki.jit
    def flat(x):
        out = nl.ndarray((4, 6), dtype=x.dtype, buffer=nl.shared_hbm)
        nl.store(out, value=nl.load(x))
        return out.reshape((2, 2, 6))

    x = np.arange(24, dtype=np.float32).reshape(4, 6)
    got = flat(x)
    assert got.shape == (2, 2, 6)
    np.testing.assert_array_equal(got, x.reshape(2, 2, 6))

    @nki.jit
    def part(x):
        out = nl.ndarray((4, 6), dtype=x.dtype, buffer=nl.shared_hbm)
        nl.store(out, value=nl.load(x))
        return out[0:2, :]

    with pytest.raises(TypeError, match=r"must return the nl.shared_hbm outputs it allocated"):
        part(x)

"""Output coverage for NKI Python kernels (docs/design-notes.md, "Output coverage"): a
``shared_hbm`` output the kernel never stores, or stores except part of it, is a ``TraceError``
at the output's allocation line naming the first element never written, not zeros."""

from __future__ import annotations

import inspect
from typing import Any

import numpy as np
import pytest

import torch_nki.nki.language as nl
from torch_nki import nki
from torch_nki.errors import TraceError


def _line_of(fn: Any, marker: str) -> str:
    fn = inspect.unwrap(fn)
    lines, start = inspect.getsourcelines(fn)
    offset = next(i for i, text in enumerate(lines) if marker in text)
    return f"{inspect.getsourcefile(fn)}:{start + offset}"


def _x() -> np.ndarray:
    return np.arange(6 * 8, dtype=np.float32).reshape(6, 8)


def test_an_output_never_stored_is_a_trace_error() -> None:
    @nki.jit
    def never_stores(x):
        out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)  # the output
        nl.load(x)
        return out

    with pytest.raises(
        TraceError, match=r"output `out0` \(shape \[6, 8\]\) is not fully written: 48 of 48"
    ) as e:
        nki.simulate(never_stores)(_x())
    assert e.value.location == _line_of(never_stores, "# the output")


def test_an_output_stored_except_its_last_row_is_a_trace_error() -> None:
    @nki.jit
    def misses_the_last_row(x):
        out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)  # the output
        n = x.shape[0]
        for i in nl.affine_range(n - 1):
            nl.store(out[i : i + 1, :], value=nl.load(x[i : i + 1, :]))
        return out

    with pytest.raises(TraceError, match=r"8 of 48 elements are never stored, the first at \[5, 0\]") as e:
        nki.simulate(misses_the_last_row)(_x())
    assert e.value.location == _line_of(misses_the_last_row, "# the output")


def test_an_output_stored_in_full_passes() -> None:
    @nki.jit
    def copies(x):
        out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
        for i in nl.affine_range(x.shape[0]):
            nl.store(out[i : i + 1, :], value=nl.load(x[i : i + 1, :]))
        return out

    np.testing.assert_array_equal(nki.simulate(copies)(_x()), _x())

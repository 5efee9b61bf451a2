"""The frontend arms of the vector-engine instructions added after the first set: each runs
through ``nisa.<name>(...)`` against NumPy / torch, emits NKI source that traces back to the same
program, and its operand errors and unimplemented keywords name the call."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
import torch

import torch_nki.nki.isa as nisa
import torch_nki.nki.language as nl
from torch_nki import nki
from torch_nki.errors import TraceError


def _rand(*shape: int, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).uniform(-1, 1, shape).astype(np.float32)


def _round_trip(kernel: Any, *args: Any, target: str = "trn2") -> str:
    """The kernel's emitted source, checked to trace back to the same program."""
    program = nki.trace(kernel, *args, target=target)
    source = program.emit()
    again = nki.trace(nki.load_source(source, kernel.__name__).__dict__[kernel.__name__], *args, target=target)
    assert again.difference(program) is None, source
    return source


@nki.jit
def reciprocal_kernel(x):
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    t = nl.load(x)
    r = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.sbuf)
    nisa.reciprocal(dst=r, data=t)
    nl.store(out, value=r)
    return out


def test_reciprocal_matches_numpy_with_its_special_values() -> None:
    x = _rand(96, 70) * 5
    x[0, :6] = [0.0, -0.0, np.inf, -np.inf, np.nan, 3.0]
    got = nki.simulate(reciprocal_kernel)(x)
    with np.errstate(divide="ignore"):
        want = np.float32(1.0) / x
    np.testing.assert_array_equal(got, want)
    assert np.signbit(got[0, 3]) and got[0, 1] == -np.inf


def test_reciprocal_rounds_the_fp32_result_to_bf16() -> None:
    x = torch.rand(64, 33, dtype=torch.bfloat16) + 0.5
    got = reciprocal_kernel(x)
    assert got.dtype == torch.bfloat16
    torch.testing.assert_close(got, (1.0 / x.float()).to(torch.bfloat16), rtol=0, atol=0)


def test_reciprocal_emits_and_traces_back() -> None:
    source = _round_trip(reciprocal_kernel, _rand(8, 16))
    assert "nisa.reciprocal(dst=t1, data=t0)" in source


def test_reciprocal_shape_mismatch_is_a_trace_error_naming_it() -> None:
    @nki.jit
    def bad(x):
        out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
        t = nl.load(x)
        r = nl.ndarray((8, 4), dtype=x.dtype, buffer=nl.sbuf)
        nisa.reciprocal(dst=r, data=t)
        nl.store(out, value=t)
        return out

    with pytest.raises(TraceError, match=r"reciprocal: data has shape \[8, 16\] but dst has shape \[8, 4\]"):
        nki.simulate(bad)(_rand(8, 16))

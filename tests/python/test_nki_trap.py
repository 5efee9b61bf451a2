"""The non-finite trap (``nki.simulate(kernel, trap_nonfinite=True)``,
``TORCH_NKI_TRAP_NONFINITE=1``): the run stops at the first instruction that makes a finite
tile element NaN or infinite, naming it, its line, the element and what it read."""

from __future__ import annotations

import numpy as np
import pytest

import torch_nki.nki.isa as nisa
import torch_nki.nki.language as nl
from torch_nki import nki
from torch_nki.errors import SimulationError


@nki.jit
def log_of(x):
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    tile = nl.load(x)
    logs = nl.log(tile)
    nl.store(out, value=logs)
    return out


@nki.jit
def reads_unwritten(x):
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    tile = nl.ndarray((4, 8), dtype=nl.float32, buffer=nl.sbuf)
    nisa.dma_copy(dst=tile[0:2, :], src=x[0:2, :])
    doubled = nl.ndarray((4, 8), dtype=nl.float32, buffer=nl.sbuf)
    nisa.tensor_scalar(dst=doubled, data=tile, op0=nl.multiply, operand0=2.0)
    nl.store(out, value=doubled)
    return out


def test_without_the_trap_a_nan_is_computed_silently() -> None:
    x = np.ones((4, 8), np.float32)
    x[1, 3] = -1.0
    assert np.isnan(nki.simulate(log_of)(x)[1, 3])


def test_the_trap_names_the_instruction_the_line_and_the_element() -> None:
    x = np.ones((4, 8), np.float32)
    x[1, 3] = -1.0
    with pytest.raises(SimulationError) as caught:
        nki.simulate(log_of, trap_nonfinite=True)(x)
    message = str(caught.value)
    assert "non-finite trap: this instruction wrote NaN to" in message
    assert "[1, 3]" in message
    assert "all finite" in message
    assert f"{__file__}:{log_of.fn.__code__.co_firstlineno + 4}" in message


def test_a_finite_run_is_unchanged_by_the_trap() -> None:
    x = np.full((4, 8), 2.0, np.float32)
    assert np.array_equal(nki.simulate(log_of, trap_nonfinite=True)(x), nki.simulate(log_of)(x))


def test_the_trap_tells_reads_of_unwritten_elements() -> None:
    with pytest.raises(SimulationError, match="never written") as caught:
        nki.simulate(reads_unwritten, trap_nonfinite=True)(np.ones((4, 8), np.float32))
    assert "16 element(s) never written" in str(caught.value), caught.value
    assert "[2, 0]" in str(caught.value)


def test_the_environment_turns_the_trap_on(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(nki.TRAP_NONFINITE_ENV, "1")
    x = np.ones((4, 8), np.float32)
    x[0, 0] = 0.0
    with pytest.raises(SimulationError, match="wrote -inf"):
        log_of(x)

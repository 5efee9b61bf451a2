"""``nc_matmul(is_transpose=True)``: the tensor engine's transpose mode. With an identity
``moving`` it transposes ``stationary`` bit for bit on NeuronCore-v3+ (NaN, infinities and
``-0.0`` included), where an ordinary matmul spreads a NaN or infinity through its zero
products; on NeuronCore-v2 the flag only marks the instruction, and the matmul is ordinary."""

from __future__ import annotations

import numpy as np
import pytest

import torch_nki.nki.isa as nisa
import torch_nki.nki.language as nl
from torch_nki import nki


def _transpose(is_transpose: bool, target: str):
    @nki.jit(target=target)
    def transpose_by_identity(x, identity):
        out = nl.ndarray((x.shape[1], x.shape[0]), dtype=nl.float32, buffer=nl.shared_hbm)
        a, eye = nl.load(x), nl.load(identity)
        acc = nl.ndarray((x.shape[1], x.shape[0]), dtype=nl.float32, buffer=nl.psum)
        nisa.nc_matmul(dst=acc, stationary=a, moving=eye, is_transpose=is_transpose)
        t = nl.ndarray(acc.shape, dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_copy(dst=t, src=acc)
        nl.store(out, value=t)
        return out

    return transpose_by_identity


def _special() -> np.ndarray:
    x = np.arange(24, dtype=np.float32).reshape(4, 6)
    x[0, 1], x[1, 2], x[2, 3], x[3, 0] = np.nan, np.inf, -np.inf, -0.0
    return x


def test_transpose_mode_moves_nan_inf_and_negative_zero_through_bit_for_bit() -> None:
    x, eye = _special(), np.eye(4, dtype=np.float32)
    got = nki.simulate(_transpose(True, "trn2"))(x, eye)
    np.testing.assert_array_equal(got.view(np.uint32), x.T.copy().view(np.uint32))
    # The ordinary matmul spreads them: a NaN or an infinity times the identity's zeros is NaN.
    plain = nki.simulate(_transpose(False, "trn2"))(x, eye)
    assert np.isnan(plain[1, :]).all() and np.isnan(plain).sum() > np.isnan(x).sum()


def test_on_trn1_the_flag_is_a_marker_and_the_matmul_is_ordinary() -> None:
    x, eye = _special(), np.eye(4, dtype=np.float32)
    marked = nki.trace(_transpose(True, "trn1"), x, eye, target="trn1")
    assert "is_transpose" not in marked.emit()
    np.testing.assert_array_equal(
        nki.simulate(_transpose(True, "trn1"))(x, eye), nki.simulate(_transpose(False, "trn1"))(x, eye)
    )


def test_the_flag_is_emitted_and_traces_back_to_the_same_program() -> None:
    x, eye = _special(), np.eye(4, dtype=np.float32)
    kernel = _transpose(True, "trn2")
    program = nki.trace(kernel, x, eye)
    source = program.emit()
    assert "is_transpose=True" in source
    again = nki.trace(nki.load_source(source, "transpose_by_identity").transpose_by_identity, x, eye)
    assert again.difference(program) is None


def test_transpose_mode_with_double_row_is_a_value_error() -> None:
    @nki.jit(target="trn2")
    def both(x):
        out = nl.ndarray((4, 4), dtype=nl.float32, buffer=nl.shared_hbm)
        a = nl.ndarray((2, 2, 4), dtype=nl.float8_e4m3, buffer=nl.sbuf)
        nisa.memset(dst=a, value=1.0)
        acc = nl.ndarray((4, 4), dtype=nl.float32, buffer=nl.psum)
        nisa.nc_matmul(
            dst=acc, stationary=a, moving=a, is_transpose=True, perf_mode=nisa.matmul_perf_mode.double_row
        )
        return out

    with pytest.raises(ValueError, match="double_row cannot be combined with is_transpose=True"):
        nki.simulate(both)(np.zeros((4, 4), np.float32))

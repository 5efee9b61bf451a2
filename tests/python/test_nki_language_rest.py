"""``nl.floor``, ``ceil``, ``trunc``, ``fmod``, ``mod``, ``rms_norm``, ``shared_constant``,
``shared_identity_matrix`` and ``device_print`` through the frontend: values against NumPy /
torch (special values and the fp32 limits included), the emitted source tracing back to the same
program, and the errors for misuse."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

import torch_nki.nki.isa as nisa
import torch_nki.nki.language as nl
from torch_nki import nki
from torch_nki.nki._language_rest import DEVICE_PRINTS

from refs import nki_round_trip


@nki.jit
def rounding(x):
    """``floor``, ``ceil``, ``trunc`` of ``x`` side by side, in ``x``'s dtype."""
    p, n = x.shape
    out = nl.ndarray((p, 3 * n), dtype=x.dtype, buffer=nl.shared_hbm)
    t = nl.load(x)
    r = nl.ndarray((p, 3 * n), dtype=x.dtype, buffer=nl.sbuf)
    r[:, 0:n] = nl.floor(t)
    r[:, n : 2 * n] = nl.ceil(t)
    r[:, 2 * n : 3 * n] = nl.trunc(t)
    nl.store(out, value=r)
    return out


def test_floor_ceil_trunc_match_numpy() -> None:
    special = [3.2, -3.7, 2.5, -2.5, 0.5, -0.5, 0.0, 7.0, -7.0, 1e10, -1e10, 3e38, np.inf, -np.inf, np.nan]
    edge = [8388607.5, -8388607.5, 8388608.0, 4194303.75, 2147483520.0, -2147483904.0]
    rng = np.random.default_rng(0)
    x = np.concatenate([special, edge, rng.uniform(-1000, 1000, 43)]).astype(np.float32).reshape(4, 16)
    got = np.asarray(rounding(x))
    n = x.shape[1]
    np.testing.assert_array_equal(got[:, :n], np.floor(x))
    np.testing.assert_array_equal(got[:, n : 2 * n], np.ceil(x))
    np.testing.assert_array_equal(got[:, 2 * n :], np.trunc(x))


def test_rounding_in_bf16_and_into_another_dtype() -> None:
    x = torch.tensor([[1.5, -1.5, 2.75, -2.75, 100.5, -0.25, 3.0, 1e20]], dtype=torch.bfloat16)
    got = rounding(x)
    assert got.dtype == torch.bfloat16
    want = torch.cat([torch.floor(x), torch.ceil(x), torch.trunc(x)], dim=1)
    assert torch.equal(got, want)

    @nki.jit
    def floor_to_int(x):
        out = nl.ndarray(x.shape, dtype=nl.int32, buffer=nl.shared_hbm)
        nl.store(out, value=nl.floor(nl.load(x), dtype=nl.int32))
        return out

    v = np.array([[-2.5, -0.1, 0.9, 41.99]], np.float32)
    np.testing.assert_array_equal(np.asarray(floor_to_int(v)), np.floor(v).astype(np.int32))


@nki.jit
def remainders(x, y):
    """``fmod`` and ``mod`` of tile by tile, tile by number and number by tile."""
    p, n = x.shape
    out = nl.ndarray((p, 6 * n), dtype=nl.float32, buffer=nl.shared_hbm)
    a, b = nl.load(x), nl.load(y)
    r = nl.ndarray((p, 6 * n), dtype=nl.float32, buffer=nl.sbuf)
    r[:, 0:n] = nl.fmod(a, b)
    r[:, n : 2 * n] = nl.mod(a, b)
    r[:, 2 * n : 3 * n] = nl.fmod(a, 2.5)
    r[:, 3 * n : 4 * n] = nl.mod(a, -2.5)
    r[:, 4 * n : 5 * n] = nl.fmod(7.0, b)
    r[:, 5 * n : 6 * n] = nl.mod(-7.0, b)
    nl.store(out, value=r)
    return out


def test_fmod_and_mod_match_numpy() -> None:
    rng = np.random.default_rng(1)
    x = rng.uniform(-50, 50, (8, 32)).astype(np.float32)
    y = (rng.uniform(0.5, 6, (8, 32)) * rng.choice([-1, 1], (8, 32))).astype(np.float32)
    got = np.asarray(remainders(x, y))
    n = x.shape[1]
    f32 = np.float32
    wants = [
        np.fmod(x, y),
        np.mod(x, y),
        np.fmod(x, f32(2.5)),
        np.mod(x, f32(-2.5)),
        np.fmod(f32(7.0), y),
        np.mod(f32(-7.0), y),
    ]
    for i, want in enumerate(wants):
        np.testing.assert_allclose(got[:, i * n : (i + 1) * n], want, atol=2e-5, err_msg=f"block {i}")
    # The signs follow x (fmod) and y (mod).
    assert np.all((np.sign(got[:, :n]) == np.sign(x)) | (got[:, :n] == 0))
    assert np.all((np.sign(got[:, n : 2 * n]) == np.sign(y)) | (got[:, n : 2 * n] == 0))


def test_remainders_round_trip_and_reject_bad_operands() -> None:
    x = np.ones((2, 4), np.float32)
    source = nki_round_trip(remainders, x, x + 1)
    assert "op=nl.divide" in source and "nisa.tensor_copy_predicated(" in source

    @nki.jit
    def numbers(x):
        out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
        nl.store(out, value=nl.mod(3.0, 2.0))
        return out

    with pytest.raises(TypeError, match="at least one a tile"):
        numbers(x)

    @nki.jit
    def shapes(x, y):
        out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
        nl.store(out, value=nl.fmod(nl.load(x), nl.load(y)))
        return out

    with pytest.raises(ValueError, match="does not broadcast"):
        shapes(x, np.ones((2, 3), np.float32))


@nki.jit
def rms(x, w, n, eps):
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    nl.store(out, value=nl.rms_norm(nl.load(x), nl.load(w), axis=1, n=n, epsilon=eps))
    return out


def _rms_reference(
    x: torch.Tensor, w: torch.Tensor, dims: tuple[int, ...], n: int, eps: float
) -> torch.Tensor:
    x64 = x.double()
    return x64 / torch.sqrt((x64 * x64).sum(dim=dims, keepdim=True) / n + eps) * w.double()


def test_rms_norm_matches_torch() -> None:
    g = torch.Generator().manual_seed(2)
    x = torch.randn(128, 512, generator=g)
    w = torch.randn(128, 512, generator=g)
    got = rms(x, w, 512, 1e-6)
    want = _rms_reference(x, w, (1,), 512, 1e-6)
    torch.testing.assert_close(got.double(), want, rtol=2e-5, atol=2e-5)
    # torch's own RMSNorm agrees (mean over the row, eps inside the root).
    torch_rms = torch.nn.functional.rms_norm(x, (512,), weight=None, eps=1e-6) * w
    torch.testing.assert_close(got, torch_rms, rtol=2e-5, atol=2e-5)
    # n counts the values of the RMS: a row of 200 normalised as part of 400.
    x2, w2 = torch.randn(4, 200, generator=g), torch.ones(4, 200)
    torch.testing.assert_close(rms(x2, w2, 400, 0.5).double(), _rms_reference(x2, w2, (1,), 400, 0.5))


def test_rms_norm_over_trailing_axes_with_dtypes() -> None:
    @nki.jit
    def rms3(x, w):
        out = nl.ndarray(x.shape, dtype=nl.float32, buffer=nl.shared_hbm)
        r = nl.rms_norm(nl.load(x), nl.load(w), axis=[2], n=8, dtype=nl.float32, compute_dtype=nl.float32)
        nl.store(out, value=r)
        return out

    g = torch.Generator().manual_seed(3)
    x = torch.randn(16, 3, 8, generator=g).to(torch.bfloat16)
    w = torch.randn(16, 3, 8, generator=g).to(torch.bfloat16)
    got = rms3(x, w)
    assert got.dtype == torch.float32
    torch.testing.assert_close(got.double(), _rms_reference(x, w, (2,), 8, 1e-6), rtol=1e-5, atol=1e-5)


def test_rms_norm_errors() -> None:
    x = np.ones((4, 8), np.float32)
    with pytest.raises(ValueError, match="w has shape"):
        rms(x, np.ones((4, 4), np.float32), 8, 1e-6)
    with pytest.raises(ValueError, match="n must be a positive int"):
        rms(x, x, 0, 1e-6)


def _constant_kernel(source: object) -> nki.Kernel:
    """``x`` plus three constants: ``source`` (an array or a .npy path), its bf16 copy, and an
    int8 identity column converted to fp32 by ``dtype=``."""
    table = np.arange(12, dtype=np.float32).reshape(3, 4) * 0.5 - 1.0

    @nki.jit
    def add_constants(x):
        out = nl.ndarray((3, 12), dtype=nl.float32, buffer=nl.shared_hbm)
        r = nl.ndarray((3, 12), dtype=nl.float32, buffer=nl.sbuf)
        t = nl.load(x)
        r[:, 0:4] = nl.add(t, nl.load(nl.shared_constant(source)))
        halves = nl.shared_constant(torch.from_numpy(table).to(torch.bfloat16))
        r[:, 4:8] = nl.add(t, nl.load(halves, dtype=nl.float32))
        ints = nl.shared_constant(np.identity(3, dtype=np.int8)[:, 0:1].repeat(4, axis=1), dtype=nl.float32)
        r[:, 8:12] = nl.add(t, nl.load(ints))
        nl.store(out, value=r)
        return out

    return add_constants


def test_shared_constant_from_numpy_torch_and_npy(tmp_path: Path) -> None:
    table = np.arange(12, dtype=np.float32).reshape(3, 4) * 0.5 - 1.0
    path = tmp_path / "table.npy"
    np.save(path, table)
    x = np.full((3, 4), 10.0, np.float32)
    for source in (table, str(path), path):
        got = np.asarray(_constant_kernel(source)(x))
        np.testing.assert_array_equal(got[:, 0:4], x + table)
        np.testing.assert_array_equal(
            got[:, 4:8], x + torch.from_numpy(table).to(torch.bfloat16).float().numpy()
        )
        np.testing.assert_array_equal(got[:, 8:12], x + np.eye(3)[:, 0:1].repeat(4, axis=1))
    program = nki.trace(_constant_kernel(table), x)
    assert [name for name, _, _ in program.inputs()] == ["x"]
    source = nki_round_trip(_constant_kernel(table), x)
    assert "nl.shared_constant(np.array([-1.0, -0.5," in source and "dtype=nl.bfloat16)" in source


def test_shared_constant_errors() -> None:
    x = np.ones((2, 2), np.float32)
    with pytest.raises(TypeError, match=r"float64 is not an NKI dtype"):
        _constant_kernel(np.ones((3, 4)))(x)
    with pytest.raises(TypeError, match="must be a NumPy array"):
        _constant_kernel([[1.0, 2.0]])(x)

    @nki.jit
    def argument(x, c):
        out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
        nl.store(out, value=nl.load(nl.shared_constant(c)))
        return out

    with pytest.raises(TypeError, match="must be the array itself"):
        argument(x, x)

    @nki.jit
    def write(x):
        c = nl.shared_constant(np.ones((2, 2), np.float32))
        nl.store(c, value=nl.load(x))
        return c

    with pytest.raises(Exception, match="is a shared_constant, which is read-only"):
        write(x)


def test_shared_identity_matrix() -> None:
    @nki.jit
    def identities(x):
        out = nl.ndarray((128, 128), dtype=nl.float32, buffer=nl.shared_hbm)
        small = nl.ndarray((5, 5), dtype=nl.uint8, buffer=nl.shared_hbm)
        nl.store(out, value=nl.shared_identity_matrix(n=128, dtype=nl.float32))
        into = nl.ndarray((5, 5), dtype=nl.int32, buffer=nl.sbuf)
        nl.shared_identity_matrix(5, dst=into)
        nl.store(small, value=nl.shared_identity_matrix(5))
        assert into.dtype == nl.int32
        return out, small

    big, small = identities(np.ones((1, 1), np.float32))
    np.testing.assert_array_equal(np.asarray(big), np.eye(128, dtype=np.float32))
    assert np.asarray(small).dtype == np.uint8
    np.testing.assert_array_equal(np.asarray(small), np.eye(5, dtype=np.uint8))

    @nki.jit
    def too_big(x):
        nl.shared_identity_matrix(129)
        return x

    with pytest.raises(ValueError, match=r"n must be an int in 1..128"):
        too_big(np.ones((1, 1), np.float32))


@nki.jit
def printing(x):
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    t = nl.load(x)
    nl.device_print("loaded:", t)
    # Each iteration doubles what the previous one left (and prints it): sequential_range.
    for _ in nl.sequential_range(2):
        nisa.tensor_scalar(dst=t, data=t, op0=nl.multiply, operand0=2.0)
        nl.device_print("doubled:", t[0:1, :])
    acc = nl.ndarray(x.shape, dtype=nl.float32, buffer=nl.psum)
    nisa.tensor_copy(dst=acc, src=t)
    nl.device_print("psum:", acc)
    nl.device_print("input:", x)
    nl.store(out, value=t)
    return out


def test_device_print_prints_each_value_at_its_point_of_the_kernel(
    capsys: pytest.CaptureFixture[str],
) -> None:
    DEVICE_PRINTS.clear()
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    got = printing(x)
    np.testing.assert_array_equal(np.asarray(got), x * 4)
    printed = capsys.readouterr().out
    assert printed.splitlines()[0] == "loaded: [[0. 1. 2.]"
    assert [p for p, _ in DEVICE_PRINTS] == ["loaded:", "doubled:", "doubled:", "psum:", "input:"]
    np.testing.assert_array_equal(DEVICE_PRINTS[0][1], x)
    np.testing.assert_array_equal(DEVICE_PRINTS[1][1], x[0:1] * 2)
    np.testing.assert_array_equal(DEVICE_PRINTS[2][1], x[0:1] * 4)
    np.testing.assert_array_equal(DEVICE_PRINTS[3][1], x * 4)
    np.testing.assert_array_equal(DEVICE_PRINTS[4][1], x)
    assert "doubled: [[0. 2. 4.]]" in printed and "doubled: [[0. 4. 8.]]" in printed
    # The traced program carries one extra output per print, after the kernel's own.
    assert len(nki.trace(printing, x).outputs()) == 6
    DEVICE_PRINTS.clear()


def test_device_print_errors() -> None:
    @nki.jit
    def bad(x, prefix, value):
        nl.device_print(prefix, nl.load(x) if value is None else value)
        out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
        nl.store(out, value=nl.load(x))
        return out

    x = np.ones((2, 2), np.float32)
    with pytest.raises(TypeError, match="print_prefix must be a str"):
        bad(x, 3, None)
    with pytest.raises(TypeError, match="must be a tile or an HBM tensor"):
        bad(x, "p", 1.0)

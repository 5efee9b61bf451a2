"""Each op in eager mode against its ATen reference, on ragged shapes (not multiples of 128)."""

from __future__ import annotations

import pytest
import torch

from refs import EPS, rand, rmsnorm_ref, tol

neuron = torch.ops.neuron
DTYPES = [torch.float32, torch.bfloat16]


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("shape", [(300, 1000), (3, 5, 129), (1000,)], ids=str)
def test_add(shape: tuple[int, ...], dtype: torch.dtype) -> None:
    x, y = rand(*shape, dtype=dtype), rand(*shape, dtype=dtype)
    out = neuron.add(x, y)
    assert out.shape == x.shape and out.dtype == dtype
    torch.testing.assert_close(out, x + y, **tol(dtype))


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("shape", [(300, 1000), (1, 64)], ids=str)
def test_rmsnorm(shape: tuple[int, int], dtype: torch.dtype) -> None:
    x, w = rand(*shape, dtype=dtype), rand(shape[-1], dtype=dtype)
    out = neuron.rmsnorm(x, w, EPS)
    assert out.shape == x.shape and out.dtype == dtype
    torch.testing.assert_close(out, rmsnorm_ref(x, w), **tol(dtype))


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("mkn", [(300, 700, 600), (1, 5, 3), (129, 129, 513)], ids=str)
def test_matmul(mkn: tuple[int, int, int], dtype: torch.dtype) -> None:
    m, k, n = mkn
    x, w = rand(m, k, dtype=dtype), rand(k, n, dtype=dtype)
    out = neuron.matmul(x, w)
    assert out.shape == (m, n) and out.dtype == dtype
    torch.testing.assert_close(out, x @ w, **tol(dtype, matmul=True))


def test_float16() -> None:
    x, y, w = (
        rand(33, 77, dtype=torch.float16),
        rand(33, 77, dtype=torch.float16),
        rand(77, dtype=torch.float16),
    )
    torch.testing.assert_close(neuron.add(x, y), x + y, **tol(torch.float16))
    torch.testing.assert_close(neuron.rmsnorm(x, w, EPS), rmsnorm_ref(x, w), **tol(torch.float16))


def test_rmsnorm_default_eps_and_keywords() -> None:
    x, w = rand(10, 48), rand(48)
    torch.testing.assert_close(neuron.rmsnorm(x, w), rmsnorm_ref(x, w, 1e-6), **tol(torch.float32))
    torch.testing.assert_close(neuron.rmsnorm(x, w, eps=0.5), rmsnorm_ref(x, w, 0.5), **tol(torch.float32))
    torch.testing.assert_close(neuron.rmsnorm.default(x, weight=w, eps=2), rmsnorm_ref(x, w, 2.0))


def test_non_contiguous_inputs() -> None:
    base = rand(64, 40)
    x = base.t()  # (40, 64), transposed strides
    w = rand(128)[::2]  # stride 2
    assert not x.is_contiguous() and not w.is_contiguous()
    torch.testing.assert_close(neuron.rmsnorm(x, w, EPS), rmsnorm_ref(x, w), **tol(torch.float32))
    a, b = rand(50, 30).t(), rand(20, 50).t()
    torch.testing.assert_close(neuron.matmul(a, b), a @ b, **tol(torch.float32, matmul=True))
    sliced = rand(9, 20)[:, 3:17]
    torch.testing.assert_close(neuron.add(sliced, sliced), sliced + sliced)


def test_empty_tensors() -> None:
    assert neuron.add(torch.empty(0, 7), torch.empty(0, 7)).shape == (0, 7)
    assert neuron.rmsnorm(torch.empty(0, 8), torch.ones(8)).shape == (0, 8)
    torch.testing.assert_close(neuron.matmul(torch.empty(3, 0), torch.empty(0, 4)), torch.zeros(3, 4))


def test_results_are_deterministic() -> None:
    x, w = rand(257, 300), rand(300, 129)
    first = neuron.matmul(x, w)
    for _ in range(3):
        assert torch.equal(neuron.matmul(x, w), first)

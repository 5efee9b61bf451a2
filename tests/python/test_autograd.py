"""Gradients: against ATen autograd on the reference formulas, and torch.autograd.gradcheck.

The kernels compute in fp32 (float64 inputs are downcast, as on TorchNeuron), so gradcheck uses
a large finite-difference step and loose tolerances; the ATen comparison is the precise check.
"""

from __future__ import annotations

import warnings

import pytest
import torch

from refs import rand, rmsnorm_ref, tol

neuron = torch.ops.neuron


def _grads(fn: object, inputs: list[torch.Tensor], grad_out: torch.Tensor) -> list[torch.Tensor]:
    leaves = [t.detach().clone().requires_grad_(True) for t in inputs]
    out = fn(*leaves)  # type: ignore[operator]
    out.backward(grad_out)
    return [t.grad for t in leaves]


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
def test_rmsnorm_grads_match_aten(dtype: torch.dtype) -> None:
    x, w = rand(37, 300, dtype=dtype), rand(300, dtype=dtype)
    g = rand(37, 300, dtype=dtype)
    got = _grads(lambda a, b: neuron.rmsnorm(a, b, 1e-6), [x, w], g)
    want = _grads(rmsnorm_ref, [x, w], g)
    # weight's gradient sums 37 rows: in bf16 it gets the reduction tolerance scaled by the row count.
    torch.testing.assert_close(got[0], want[0], **tol(dtype))
    loose = tol(dtype) if dtype == torch.float32 else {"rtol": 1.6e-2, "atol": 1e-1}
    torch.testing.assert_close(got[1], want[1], **loose)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
def test_matmul_grads_match_aten(dtype: torch.dtype) -> None:
    x, w, g = rand(65, 130, dtype=dtype), rand(130, 33, dtype=dtype), rand(65, 33, dtype=dtype)
    got = _grads(neuron.matmul, [x, w], g)
    want = _grads(torch.matmul, [x, w], g)
    for a, b in zip(got, want, strict=True):
        torch.testing.assert_close(a, b, **tol(dtype, matmul=True))


def test_add_grads_are_identity() -> None:
    x, y, g = rand(4, 9), rand(4, 9), rand(4, 9)
    gx, gy = _grads(neuron.add, [x, y], g)
    assert torch.equal(gx, g) and torch.equal(gy, g)


def test_only_requested_grads() -> None:
    x, w = rand(5, 8, requires_grad=True), rand(8)
    neuron.rmsnorm(x, w).sum().backward()
    assert x.grad is not None and w.grad is None


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64], ids=str)
def test_gradcheck(dtype: torch.dtype) -> None:
    x, w = rand(4, 8, dtype=dtype, requires_grad=True), rand(8, dtype=dtype, requires_grad=True)
    a, b = rand(3, 5, dtype=dtype, requires_grad=True), rand(5, 4, dtype=dtype, requires_grad=True)
    loose = {"eps": 1e-3, "atol": 1e-2, "rtol": 1e-2}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # float64 downcast / non-double gradcheck warnings
        assert torch.autograd.gradcheck(lambda p, q: neuron.rmsnorm(p, q, 1e-6), (x, w), **loose)
        assert torch.autograd.gradcheck(neuron.matmul, (a, b), **loose)
        assert torch.autograd.gradcheck(neuron.add, (a, a.detach().clone().requires_grad_()), **loose)
        assert torch.autograd.gradgradcheck(neuron.matmul, (a, b), **loose)

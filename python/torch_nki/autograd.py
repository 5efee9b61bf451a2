"""Backward formulas of the library ops, registered with ``torch.library.register_autograd``.

:data:`RULES` maps an op name to its rule; an op without an entry simply has no autograd
support. Backward functions are composed of torch ops (and ``torch.ops.neuron.*`` ops, which
have fake kernels), so they trace under ``torch.compile`` / AOTAutograd.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch


@dataclass(frozen=True)
class AutogradRule:
    """``setup_context(ctx, inputs, output)`` saves what ``backward(ctx, *grads)`` needs."""

    setup_context: Callable[..., None]
    backward: Callable[..., Any]


def _compute_dtype(dtype: torch.dtype) -> torch.dtype:
    """fp32 for 16-bit (and narrower) floats; float64 stays float64."""
    return torch.promote_types(dtype, torch.float32)


# -- rmsnorm: y = x * rsqrt(mean(x², -1) + eps) * weight ------------------------------------------


def _rmsnorm_setup(ctx: Any, inputs: tuple[Any, ...], output: torch.Tensor) -> None:
    x, weight, eps = inputs
    ctx.save_for_backward(x, weight)
    ctx.eps = eps


def _rmsnorm_backward(ctx: Any, grad: torch.Tensor) -> tuple[torch.Tensor | None, torch.Tensor | None, None]:
    x, weight = ctx.saved_tensors
    dt = _compute_dtype(x.dtype)
    x32, w32, g32 = x.to(dt), weight.to(dt), grad.to(dt)
    rstd = torch.rsqrt(x32.pow(2).mean(-1, keepdim=True) + ctx.eps)
    xhat = x32 * rstd
    grad_x = grad_w = None
    if ctx.needs_input_grad[0]:
        gxhat = g32 * w32
        grad_x = (rstd * (gxhat - xhat * (gxhat * xhat).mean(-1, keepdim=True))).to(x.dtype)
    if ctx.needs_input_grad[1]:
        grad_w = (g32 * xhat).reshape(-1, x.shape[-1]).sum(0).to(weight.dtype)
    return grad_x, grad_w, None


# -- matmul: y = x @ w --------------------------------------------------------------------------------


def _matmul_setup(ctx: Any, inputs: tuple[Any, ...], output: torch.Tensor) -> None:
    x, w = inputs
    ctx.save_for_backward(x, w)


def _matmul_backward(ctx: Any, grad: torch.Tensor) -> tuple[torch.Tensor | None, torch.Tensor | None]:
    x, w = ctx.saved_tensors
    mm = torch.ops.neuron.matmul.default
    grad_x = mm(grad.contiguous(), w.t().contiguous()) if ctx.needs_input_grad[0] else None
    grad_w = mm(x.t().contiguous(), grad.contiguous()) if ctx.needs_input_grad[1] else None
    return grad_x, grad_w


# -- add: y = x + y -------------------------------------------------------------------------------------


def _add_setup(ctx: Any, inputs: tuple[Any, ...], output: torch.Tensor) -> None:
    pass


def _add_backward(ctx: Any, grad: torch.Tensor) -> tuple[torch.Tensor | None, torch.Tensor | None]:
    return (
        grad if ctx.needs_input_grad[0] else None,
        grad if ctx.needs_input_grad[1] else None,
    )


#: Autograd rules by op name.
RULES: dict[str, AutogradRule] = {
    "add": AutogradRule(_add_setup, _add_backward),
    "matmul": AutogradRule(_matmul_setup, _matmul_backward),
    "rmsnorm": AutogradRule(_rmsnorm_setup, _rmsnorm_backward),
}

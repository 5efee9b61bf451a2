"""ATen references, tolerances (DESIGN §14) and input generation for the tests."""

from __future__ import annotations

import torch

EPS = 1e-6


def rmsnorm_ref(x: torch.Tensor, weight: torch.Tensor, eps: float = EPS) -> torch.Tensor:
    """transformers' LlamaRMSNorm in ATen ops.

    to(fp32) → pow(2) → mean → add(eps) → rsqrt → mul → to(dtype) → mul(weight).
    """
    h = x.to(torch.float32)
    h = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + eps)
    return weight * h.to(x.dtype)


def tol(dtype: torch.dtype, matmul: bool = False) -> dict[str, float]:
    """``rtol``/``atol`` vs ATen on the same inputs."""
    if dtype == torch.bfloat16:
        return {"rtol": 1.6e-2, "atol": 1e-2}
    if dtype == torch.float16:
        return {"rtol": 1e-3, "atol": 1e-3}
    return {"rtol": 1e-4, "atol": 1e-4} if matmul else {"rtol": 1e-5, "atol": 1e-5}


def rand(*shape: int, dtype: torch.dtype = torch.float32, requires_grad: bool = False) -> torch.Tensor:
    """Uniform in [-1, 1), rounded to ``dtype``."""
    t = (torch.rand(shape) * 2 - 1).to(dtype)
    return t.requires_grad_(requires_grad)

"""Input generation shared by the tests (references and tolerances come from the registry,
through ``torch_nki.testing``)."""

from __future__ import annotations

import torch


def rand(*shape: int, dtype: torch.dtype = torch.float32, requires_grad: bool = False) -> torch.Tensor:
    """Uniform in [-1, 1), rounded to ``dtype``."""
    t = (torch.rand(shape) * 2 - 1).to(dtype)
    return t.requires_grad_(requires_grad)

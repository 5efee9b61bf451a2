"""Input generation shared by the tests (references and tolerances come from the registry,
through ``torch_nki.testing``), and the fixture generator as a module."""

from __future__ import annotations

import functools
import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import torch

GENERATOR = Path(__file__).resolve().parents[1] / "reference" / "generate.py"
"""The ATen fixture generator (``tests/reference/generate.py``)."""


@functools.cache
def generator() -> ModuleType:
    """``tests/reference/generate.py``, imported once."""
    spec = importlib.util.spec_from_file_location("reference_generate", GENERATOR)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up
    spec.loader.exec_module(module)
    return module


def rand(*shape: int, dtype: torch.dtype = torch.float32, requires_grad: bool = False) -> torch.Tensor:
    """Uniform in [-1, 1), rounded to ``dtype``."""
    t = (torch.rand(shape) * 2 - 1).to(dtype)
    return t.requires_grad_(requires_grad)


def tiny_llama(seed: int = 0) -> torch.nn.Module:
    """``LlamaForCausalLM`` from a small config (random weights, nothing downloaded), in eval
    mode; the caller imports transformers first (``pytest.importorskip``)."""
    import transformers

    cfg = transformers.LlamaConfig(
        vocab_size=128,
        hidden_size=64,
        intermediate_size=160,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=64,
    )
    torch.manual_seed(seed)
    return transformers.LlamaForCausalLM(cfg).eval()

"""Input generation shared by the tests (references and tolerances come from the registry,
through ``torch_nki.testing``), the fixture generator as a module, and the NKI frontend's
emit-and-trace-back check."""

from __future__ import annotations

import functools
import importlib.util
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

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


def tiny_gemma(seed: int = 0) -> torch.nn.Module:
    """``GemmaForCausalLM`` from a small config (its ``gelu_pytorch_tanh`` MLP and offset RMSNorms,
    ``x̂ · (1 + weight)``), in eval mode, every norm weight drawn from N(0, 0.5) rather than left
    at its initial zero (so an RMSNorm kernel given ``weight`` instead of ``1 + weight`` differs
    visibly); the caller imports transformers first."""
    import transformers

    cfg = transformers.GemmaConfig(
        vocab_size=128,
        hidden_size=64,
        intermediate_size=160,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        head_dim=16,
        max_position_embeddings=64,
    )
    torch.manual_seed(seed)
    model = transformers.GemmaForCausalLM(cfg).eval()
    with torch.no_grad():
        for name, param in model.named_parameters():
            if "norm" in name:
                param.normal_(0.0, 0.5)
    return model


def nki_round_trip(kernel: Any, *args: Any, target: str = "trn2") -> str:
    """The frontend kernel's emitted NKI source, checked to trace back to the same program."""
    import numpy as np

    from torch_nki import nki

    program = nki.trace(kernel, *args, target=target)
    source: str = program.emit()
    emitted = nki.load_source(source, kernel.__name__).__dict__[kernel.__name__]
    # The emitted kernel's parameters are the arrays (other arguments are specialised away).
    arrays = [a for a in args if isinstance(a, np.ndarray | torch.Tensor)]
    again = nki.trace(emitted, *arrays, target=target)
    assert again.difference(program) is None, source
    return source

"""The README's Python quick start runs as written, and its sample error message is the real one."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import torch

README = Path(__file__).resolve().parents[2] / "README.md"


def _blocks(lang: str) -> list[str]:
    return re.findall(rf"```{lang}\n(.*?)```", README.read_text(encoding="utf-8"), flags=re.S)


def test_python_blocks_run() -> None:
    swap_block, quick_start = _blocks("python")
    namespace: dict[str, object] = {}
    exec(compile(quick_start, str(README), "exec"), namespace)
    y, z = namespace["y"], namespace["z"]
    assert isinstance(y, torch.Tensor) and y.shape == (300, 1000)
    assert isinstance(z, torch.Tensor) and z.shape == (300, 512)
    pytest.importorskip("transformers")
    namespace = {}
    exec(compile(swap_block, str(README), "exec"), namespace)
    assert namespace["swap"].swapped  # type: ignore[attr-defined]


def test_sample_error_message_is_real() -> None:
    sample = next(b for b in _blocks("text") if b.startswith("ValueError: neuron::rmsnorm"))
    with pytest.raises(ValueError) as info:
        torch.ops.neuron.rmsnorm(torch.randn(300, 1000), torch.randn(512), 1e-6)
    assert f"ValueError: {info.value}" == sample.strip()

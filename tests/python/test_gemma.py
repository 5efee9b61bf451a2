"""Gemma (``GemmaForCausalLM`` from a small config, random weights, no downloads): its offset
RMSNorms (``x̂ · (1 + weight)``) and gated-GELU MLPs (``gelu_pytorch_tanh``, the tanh
approximation) swap and verify with nothing reverted, eager and through ``backend="nki"``; a
module that only looks like one of those kinds is still reverted."""

from __future__ import annotations

from collections import Counter

import pytest
import torch

import torch_nki
from torch_nki import compiler

from refs import tiny_gemma

pytest.importorskip("transformers")


@pytest.fixture(scope="module")
def ids() -> torch.Tensor:
    return torch.randint(0, 128, (2, 17), generator=torch.Generator().manual_seed(7))


def structure(model: torch.nn.Module) -> Counter[str]:
    """How many instances of each Gemma module class the model has."""
    return Counter(type(m).__name__ for m in model.modules())


def test_gemma_swaps_and_verifies_with_nothing_reverted(ids: torch.Tensor) -> None:
    model = tiny_gemma()
    with torch.no_grad():
        want = model(ids).logits
    profiled = torch_nki.profile(model, ids, steps=1)
    # The profile names the kind the swap will keep: an RMSNorm looks the same, but computes
    # something else.
    norms = [row for row in profiled.modules if row.target.endswith("GemmaRMSNorm")]
    assert norms and {row.kernel for row in norms} == {"OffsetRMSNorm: rmsnorm"}, norms
    report = torch_nki.swap(model, profiled)
    assert not report.reverted, report.to_markdown()
    by_kind = Counter(e.kind for e in report.swapped)
    classes = structure(model)
    assert by_kind["OffsetRMSNorm"] == classes["GemmaRMSNorm"] > 0
    assert by_kind["GELU MLP"] == classes["GemmaMLP"] > 0
    assert by_kind["Attention"] == classes["GemmaAttention"] > 0
    assert by_kind["Linear"] == classes["Linear"]
    mlp = next(e for e in report.entries if e.kind == "GELU MLP")
    assert mlp.kernels == ("gelu_mul", "linear")
    with torch.no_grad(), torch_nki.hotspots.record_neuron_calls() as calls:
        got = model(ids).logits
    # The MLP's gelu_mul runs the model's own approximation, and the swapped model's logits are
    # eager's.
    assert {args[2] for op, args in calls if op == "gelu_mul"} == {"tanh"}
    torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-4)
    torch_nki.unswap(model)


def test_gemma_in_bf16_swaps_on_generated_inputs() -> None:
    model = tiny_gemma(seed=1).to(torch.bfloat16)
    report = torch_nki.swap(model)
    assert report.swapped and not report.reverted, report.to_markdown()
    assert {e.kind for e in report.entries} == {"OffsetRMSNorm", "GELU MLP", "Attention", "Linear"}
    torch_nki.unswap(model)


def test_gemma_compiles_with_its_norms_and_gated_gelu_rewritten(ids: torch.Tensor) -> None:
    torch._dynamo.reset()
    model = tiny_gemma(seed=2)
    with torch.no_grad():
        want = model(ids).logits
        got = torch.compile(model, backend="nki", fullgraph=True)(ids).logits
    torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-4)
    done = Counter(d.pattern for d in compiler.last_log() if d.rewritten)
    layers = structure(model)["GemmaDecoderLayer"]
    assert done["gelu(a) * b"] == layers
    assert done["rmsnorm"] == structure(model)["GemmaRMSNorm"]
    torch._dynamo.reset()


class _LookalikeRMSNorm(torch.nn.Module):
    """Shaped like Gemma's RMSNorm (``weight``, ``eps``), but scaled by ``0.25 + weight``:
    neither ``x̂ · weight`` nor ``x̂ · (1 + weight)``."""

    def __init__(self, d: int) -> None:
        super().__init__()
        self.weight = torch.nn.Parameter(torch.randn(d, generator=torch.Generator().manual_seed(0)))
        self.eps = 1e-6

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * (0.25 + self.weight)


class _LookalikeMLP(torch.nn.Module):
    """Shaped like Gemma's MLP (projections and a tanh-GELU ``act_fn``), but its forward adds the
    gate instead of multiplying it."""

    def __init__(self) -> None:
        super().__init__()
        self.gate_proj, self.up_proj = torch.nn.Linear(8, 12, bias=False), torch.nn.Linear(8, 12, bias=False)
        self.down_proj = torch.nn.Linear(12, 8, bias=False)
        self.act_fn = torch.nn.GELU(approximate="tanh")

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.down_proj(self.act_fn(self.gate_proj(x)) + self.up_proj(x))


def test_lookalikes_of_the_gemma_kinds_are_reverted() -> None:
    model = torch.nn.Sequential(_LookalikeRMSNorm(8), _LookalikeMLP())
    x = torch.randn(3, 8)
    with torch.no_grad():
        want = model(x)
    report = torch_nki.swap(model)
    entries = {e.name: e for e in report.entries}
    norm, mlp = entries["0"], entries["1"]
    assert norm.status == "reverted" and norm.kind == "RMSNorm or OffsetRMSNorm"
    assert (
        norm.reason.startswith("RMSNorm: outputs differ") and "; OffsetRMSNorm: outputs differ" in norm.reason
    )
    assert mlp.status == "reverted" and mlp.kind == "GELU MLP" and "outputs differ" in mlp.reason
    assert "forward" not in model[0].__dict__ and "forward" not in model[1].__dict__
    with torch.no_grad():
        torch.testing.assert_close(model(x), want)
    torch_nki.unswap(model)

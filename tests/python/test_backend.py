"""``torch.compile(..., backend="nki")``: graph patterns become neuron ops where the contracts accept
the shapes, the result equals eager, nothing breaks the graph, and every decision is logged."""

from __future__ import annotations

from collections import Counter

import pytest
import torch
import torch.nn.functional as F

import torch_nki  # noqa: F401
from torch_nki import compiler

from refs import tiny_llama


def decisions() -> Counter[tuple[str, bool]]:
    return Counter((d.pattern, d.rewritten) for d in compiler.last_log())


def test_the_backend_is_registered_through_its_entry_point() -> None:
    assert "nki" in torch._dynamo.list_backends()


@pytest.mark.usefixtures("dynamo")
def test_patterns_are_rewritten_and_results_match_eager() -> None:
    def block(
        x: torch.Tensor, w: torch.Tensor, g: torch.Tensor, up: torch.Tensor, m: torch.Tensor
    ) -> torch.Tensor:
        h = x.to(torch.float32)
        h = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + 1e-6)
        y = w * h.to(x.dtype)
        a = F.silu(F.linear(y, g)) * F.linear(y, up)
        s = torch.softmax(a @ m, dim=-1)
        q = s.view(2, 3, 8, 16)
        return F.scaled_dot_product_attention(q, q[:, :1], q[:, :1], is_causal=True, enable_gqa=True)

    args = (
        torch.randn(2, 8, 32),
        torch.rand(32) + 0.5,
        torch.randn(64, 32),
        torch.randn(64, 32),
        torch.randn(64, 48),
    )
    want = block(*args)
    got = torch.compile(block, backend="nki", fullgraph=True)(*args)
    torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-5)
    assert decisions() == Counter(
        {
            ("rmsnorm", True): 1,
            ("linear", True): 2,
            ("silu(a) * b", True): 1,
            ("matmul", True): 1,
            ("softmax", True): 1,
            ("sdpa", True): 1,
        }
    )


@pytest.mark.usefixtures("dynamo")
def test_addmm_with_a_bias_vector_becomes_linear() -> None:
    def affine(b: torch.Tensor, x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
        return torch.addmm(b, x, w)

    args = (torch.randn(24), torch.randn(10, 40), torch.randn(40, 24))
    got = torch.compile(affine, backend="nki", fullgraph=True)(*args)
    torch.testing.assert_close(got, affine(*args), rtol=1e-4, atol=1e-4)
    assert decisions() == Counter({("addmm", True): 1})


@pytest.mark.usefixtures("dynamo")
def test_a_shape_the_contract_rejects_is_kept_with_its_reason() -> None:
    def norm(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
        return w * (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6))

    x, w = torch.randn(2, 16385), torch.rand(16385)
    torch.testing.assert_close(torch.compile(norm, backend="nki", fullgraph=True)(x, w), norm(x, w))
    (d,) = compiler.last_log()
    assert d.pattern == "rmsnorm" and not d.rewritten and "D <= 16384" in d.reason


@pytest.mark.usefixtures("dynamo")
def test_llama_compiles_with_zero_graph_breaks_and_eager_logits() -> None:
    pytest.importorskip("transformers")
    model = tiny_llama()
    ids = torch.randint(0, 128, (2, 17))
    with torch.no_grad():
        want = model(ids, use_cache=False).logits
        got = torch.compile(model, backend="nki", fullgraph=True)(ids, use_cache=False).logits
    torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-4)
    made = decisions()
    assert made[("linear", True)] == 15 and made[("rmsnorm", True)] == 5 and made[("silu(a) * b", True)] == 2
    assert made[("rotary", True)] == 4  # query and key of both layers, one rope call per layer
    # transformers builds the causal mask from arange in the graph: folded, it is exactly causal.
    assert made[("sdpa", True)] == 2
    assert not [d for d in compiler.last_log() if not d.rewritten]
    torch._dynamo.reset()
    with torch.no_grad():
        explanation = torch._dynamo.explain(model)(ids, use_cache=False)
    assert explanation.graph_break_count == 0


@pytest.mark.usefixtures("dynamo")
def test_a_padding_mask_keeps_attention_in_aten() -> None:
    pytest.importorskip("transformers")
    model = tiny_llama()
    ids = torch.randint(0, 128, (2, 17))
    padding = torch.ones(2, 17, dtype=torch.long)
    padding[0, :3] = 0
    with torch.no_grad():
        want = model(ids, attention_mask=padding, use_cache=False).logits
        compiled = torch.compile(model, backend="nki", fullgraph=True)
        got = compiled(ids, attention_mask=padding, use_cache=False).logits
    torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-4)
    kept = [d for d in compiler.last_log() if not d.rewritten]
    assert len(kept) == 2
    assert all(d.pattern == "sdpa" and "not a static causal mask" in d.reason for d in kept)

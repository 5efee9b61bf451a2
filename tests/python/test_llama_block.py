"""A tiny Llama-style decoder written with only ``torch.ops.neuron`` calls (embedding, residual
adds and layout views aside) trains under ``torch.compile(fullgraph=True)`` with the losses and
gradients of the same model written with ATen ops.

Both models start from one set of weights and take SGD steps on the next-token loss of one
batch. The neuron model's loss is ``neuron.cross_entropy`` on the logits and the next-token
ids (int64, as a training loop passes them).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import pytest
import torch
import torch.nn.functional as F

import torch_nki  # noqa: F401  (registers torch.ops.neuron)

neuron = torch.ops.neuron


@dataclass(frozen=True)
class Config:
    vocab: int = 96
    hidden: int = 64
    heads: int = 4
    kv_heads: int = 2
    intermediate: int = 160
    layers: int = 2
    eps: float = 1e-6

    @property
    def head_dim(self) -> int:
        return self.hidden // self.heads


def init_weights(cfg: Config, seed: int = 0) -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)

    def w(*shape: int) -> torch.Tensor:
        return torch.randn(*shape, generator=g) / math.sqrt(shape[-1])

    weights = {"embed": torch.randn(cfg.vocab, cfg.hidden, generator=g), "norm": torch.ones(cfg.hidden)}
    kv = cfg.kv_heads * cfg.head_dim
    for i in range(cfg.layers):
        weights |= {
            f"{i}.attn_norm": 1 + 0.1 * torch.randn(cfg.hidden, generator=g),
            f"{i}.q": w(cfg.hidden, cfg.hidden),
            f"{i}.k": w(kv, cfg.hidden),
            f"{i}.v": w(kv, cfg.hidden),
            f"{i}.o": w(cfg.hidden, cfg.hidden),
            f"{i}.mlp_norm": 1 + 0.1 * torch.randn(cfg.hidden, generator=g),
            f"{i}.gate": w(cfg.intermediate, cfg.hidden),
            f"{i}.up": w(cfg.intermediate, cfg.hidden),
            f"{i}.down": w(cfg.hidden, cfg.intermediate),
        }
    weights["lm_head"] = w(cfg.vocab, cfg.hidden)
    return weights


def rotary(cfg: Config, seq: int) -> tuple[torch.Tensor, torch.Tensor]:
    inv = 1.0 / (10000 ** (torch.arange(0, cfg.head_dim, 2).float() / cfg.head_dim))
    freqs = torch.outer(torch.arange(seq).float(), inv)
    emb = torch.cat((freqs, freqs), dim=-1)
    return emb.cos(), emb.sin()


def heads(x: torch.Tensor, n: int, d: int) -> torch.Tensor:
    b, s, _ = x.shape
    return x.view(b, s, n, d).transpose(1, 2)


def merge(x: torch.Tensor) -> torch.Tensor:
    b, h, s, d = x.shape
    return x.transpose(1, 2).reshape(b, s, h * d)


def neuron_loss(
    cfg: Config, w: dict[str, torch.Tensor], ids: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor
) -> torch.Tensor:
    """The decoder with neuron ops: add_rmsnorm carries the residual stream."""
    h = F.embedding(ids[:, :-1], w["embed"])
    delta: torch.Tensor | None = None
    for i in range(cfg.layers):
        if delta is None:
            x = neuron.rmsnorm(h, w[f"{i}.attn_norm"], cfg.eps)
        else:
            h, x = neuron.add_rmsnorm(h, delta, w[f"{i}.attn_norm"], cfg.eps)
        q = heads(neuron.linear(x, w[f"{i}.q"]), cfg.heads, cfg.head_dim).contiguous()
        k = heads(neuron.linear(x, w[f"{i}.k"]), cfg.kv_heads, cfg.head_dim).contiguous()
        v = heads(neuron.linear(x, w[f"{i}.v"]), cfg.kv_heads, cfg.head_dim).contiguous()
        q, k = neuron.rope(q, k, cos, sin)
        attn, _ = neuron.flash_attention(q, k, v, True)
        h, x = neuron.add_rmsnorm(h, neuron.linear(merge(attn), w[f"{i}.o"]), w[f"{i}.mlp_norm"], cfg.eps)
        act = neuron.silu_mul(neuron.linear(x, w[f"{i}.gate"]), neuron.linear(x, w[f"{i}.up"]))
        delta = neuron.linear(act, w[f"{i}.down"])
    assert delta is not None
    _, x = neuron.add_rmsnorm(h, delta, w["norm"], cfg.eps)
    logits = neuron.linear(x, w["lm_head"])
    return neuron.cross_entropy(logits.reshape(-1, cfg.vocab), ids[:, 1:].reshape(-1))


def aten_loss(
    cfg: Config, w: dict[str, torch.Tensor], ids: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor
) -> torch.Tensor:
    """The same decoder written with ATen ops, as transformers' Llama computes it."""

    def rms(x: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + cfg.eps) * weight

    def rotate(x: torch.Tensor) -> torch.Tensor:
        half = x.shape[-1] // 2
        return x * cos + torch.cat((-x[..., half:], x[..., :half]), dim=-1) * sin

    h = F.embedding(ids[:, :-1], w["embed"])
    for i in range(cfg.layers):
        x = rms(h, w[f"{i}.attn_norm"])
        q = heads(F.linear(x, w[f"{i}.q"]), cfg.heads, cfg.head_dim)
        k = heads(F.linear(x, w[f"{i}.k"]), cfg.kv_heads, cfg.head_dim)
        v = heads(F.linear(x, w[f"{i}.v"]), cfg.kv_heads, cfg.head_dim)
        attn = F.scaled_dot_product_attention(rotate(q), rotate(k), v, is_causal=True, enable_gqa=True)
        h = h + F.linear(merge(attn), w[f"{i}.o"])
        x = rms(h, w[f"{i}.mlp_norm"])
        h = h + F.linear(F.silu(F.linear(x, w[f"{i}.gate"])) * F.linear(x, w[f"{i}.up"]), w[f"{i}.down"])
    logits = F.linear(rms(h, w["norm"]), w["lm_head"])
    return F.cross_entropy(logits.reshape(-1, cfg.vocab), ids[:, 1:].reshape(-1))


@pytest.mark.usefixtures("dynamo")
def test_tiny_llama_trains_under_compile_like_aten() -> None:
    cfg = Config()
    batch, seq, steps, lr = 2, 33, 3, 0.05
    cos, sin = rotary(cfg, seq - 1)
    start = init_weights(cfg)
    models = {
        "neuron": torch.compile(neuron_loss, fullgraph=True),
        "aten": torch.compile(aten_loss, fullgraph=True),
    }
    weights = {name: {k: v.clone().requires_grad_() for k, v in start.items()} for name in models}
    losses: dict[str, list[float]] = {name: [] for name in models}
    ids = torch.randint(0, cfg.vocab, (batch, seq), generator=torch.Generator().manual_seed(1))
    for _ in range(steps):
        grads = {}
        for name, fn in models.items():
            w = weights[name]
            loss = fn(cfg, w, ids, cos, sin)
            loss.backward()
            losses[name].append(loss.item())
            grads[name] = {k: v.grad.clone() for k, v in w.items() if v.grad is not None}
            with torch.no_grad():
                for v in w.values():
                    if v.grad is not None:
                        v -= lr * v.grad
                        v.grad = None
        assert grads["neuron"].keys() == grads["aten"].keys()
        for k in grads["aten"]:
            torch.testing.assert_close(grads["neuron"][k], grads["aten"][k], rtol=2e-4, atol=2e-5, msg=k)
    got, want = torch.tensor(losses["neuron"]), torch.tensor(losses["aten"])
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-6)
    assert losses["neuron"][-1] < losses["neuron"][0], "SGD on one batch should lower its loss"

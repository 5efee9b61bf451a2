"""Each swapped op of ``torch-nki bench --models``' llama-tiny forward (and its loss) at the
model's shapes, ``torch.ops.neuron.*`` against what the unswapped model runs for it, eager, no
grad, one torch thread: best of 5 blocks of ``--calls`` calls per side, alternating.

Run: ``python scripts/bench_tiny_ops.py [--calls N]``. It prints one row per op and shape with
both times and their ratio; docs/bench.md ("Whole models") quotes it with the machine's load.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable

import torch
import torch.nn.functional as F

import torch_nki  # noqa: F401  (registers torch.ops.neuron)

neuron = torch.ops.neuron


def best_of(calls: int, f: Callable[[], object], g: Callable[[], object]) -> tuple[float, float]:
    """The best per-call µs of ``f`` and of ``g`` over 5 alternating blocks of ``calls``."""
    best = [float("inf"), float("inf")]
    for _ in range(5):
        for side, h in enumerate((f, g)):
            t0 = time.perf_counter()
            for _ in range(calls):
                h()
            best[side] = min(best[side], (time.perf_counter() - t0) / calls * 1e6)
    return best[0], best[1]


def rotate_half(x: torch.Tensor) -> torch.Tensor:
    """Hugging Face Llama's ``rotate_half``."""
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


def cases() -> list[tuple[str, Callable[[], object], Callable[[], object]]]:
    """(label, neuron call, ATen call) at llama-tiny's shapes: hidden 64, intermediate 160,
    4 query and 2 kv heads of 16, vocabulary 256, 2 batches of 64 tokens."""
    x = torch.randn(2, 64, 64)
    out: list[tuple[str, Callable[[], object], Callable[[], object]]] = []
    for n_in, n_out in [(64, 64), (64, 32), (64, 160), (160, 64), (64, 256)]:
        xi, w = torch.randn(2, 64, n_in), torch.randn(n_out, n_in)
        out.append(
            (
                f"linear [2, 64, {n_in}] · [{n_out}, {n_in}]ᵀ",
                lambda xi=xi, w=w: neuron.linear(xi, w),
                lambda xi=xi, w=w: F.linear(xi, w),
            )
        )
    q, k, v = torch.randn(2, 4, 64, 16), torch.randn(2, 2, 64, 16), torch.randn(2, 2, 64, 16)
    out.append(
        (
            "flash_attention [2, 4, 64, 16] causal",
            lambda: neuron.flash_attention(q, k, v, True, None),
            lambda: F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True),
        )
    )
    cos, sin = torch.randn(64, 16), torch.randn(64, 16)
    out.append(
        (
            "rope [2, 4, 64, 16], [2, 2, 64, 16]",
            lambda: neuron.rope(q, k, cos, sin),
            lambda: (q * cos + rotate_half(q) * sin, k * cos + rotate_half(k) * sin),
        )
    )
    w64 = torch.randn(64)
    out.append(
        (
            "rmsnorm [2, 64, 64]",
            lambda: neuron.rmsnorm(x, w64, 1e-6),
            lambda: x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6) * w64,
        )
    )
    a, b = torch.randn(2, 64, 160), torch.randn(2, 64, 160)
    out.append(("silu_mul [2, 64, 160]", lambda: neuron.silu_mul(a, b), lambda: F.silu(a) * b))
    logits, target = torch.randn(128, 256), torch.randint(0, 256, (128,))
    out.append(
        (
            "cross_entropy [128, 256], int64 targets",
            lambda: neuron.cross_entropy(logits, target),
            lambda: F.cross_entropy(logits, target),
        )
    )
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=300, help="calls per timed block")
    args = parser.parse_args()
    torch.set_num_threads(1)
    print(f"{'op at llama-tiny shapes (fp32)':<44} {'neuron':>10} {'ATen':>10} {'ratio':>7}")
    with torch.no_grad():
        for label, f, g in cases():
            f(), g()  # compile and warm up
            ours, theirs = best_of(args.calls, f, g)
            print(f"{label:<44} {ours:>8.1f}µs {theirs:>8.1f}µs {ours / theirs:>6.2f}x")


if __name__ == "__main__":
    main()

"""How an op's time grows with its shape: ``torch.ops.neuron.*`` against ATen's own op (not the
op's reference expression) at a few shapes, eager, no grad, one torch thread: best of 5 blocks
of ``--calls`` calls per side, alternating. For cross_entropy it also fits the simulator's time
as a fixed part plus a part per element (from the 131x30 and 131x300 rows), which says whether
per-partition-row costs or per-element work dominate at small shapes.

Run: ``python scripts/bench_shapes.py [--calls N]``. docs/bench.md ("Small shapes") quotes it
with the machine's load.
"""

from __future__ import annotations

import argparse

import torch
import torch.nn.functional as F

import torch_nki  # noqa: F401  (registers torch.ops.neuron)
from bench_tiny_ops import best_of  # the same alternating best-of-5 timing

neuron = torch.ops.neuron


def row(name: str, shape: str, ours: float, aten: float) -> None:
    print(f"{name:<16} {shape:<12} {ours:>10.1f} µs {aten:>10.1f} µs {ours / aten:>7.2f}x")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=200, help="calls per timed block")
    calls = parser.parse_args().calls
    torch.set_num_threads(1)
    torch.manual_seed(0)
    print(f"{'op':<16} {'shape':<12} {'neuron':>13} {'aten':>13} {'ratio':>8}")
    x = torch.randn(130, 2100)
    ours, aten = best_of(calls, lambda: neuron.gelu(x), lambda: F.gelu(x))
    row("gelu", "130x2100", ours, aten)
    g = torch.randn(130, 2100)
    xr = x.detach().requires_grad_()
    y = F.gelu(xr)

    def aten_backward() -> object:
        return torch.autograd.grad(y, xr, g, retain_graph=True)

    ours, aten = best_of(calls, lambda: neuron.gelu_backward(g, x), aten_backward)
    row("gelu_backward", "130x2100", ours, aten)
    times = {}
    for n, v in [(131, 30), (131, 300), (131, 3000)]:
        logits = torch.randn(n, v)
        target = torch.randint(0, v, (n,))
        ours, aten = best_of(
            calls,
            lambda logits=logits, target=target: neuron.cross_entropy(logits, target),
            lambda logits=logits, target=target: F.cross_entropy(logits, target),
        )
        times[(n, v)] = ours
        row("cross_entropy", f"{n}x{v}", ours, aten)
    small, large = times[(131, 30)], times[(131, 300)]
    per_element = (large - small) / (131 * (300 - 30))
    fixed = small - per_element * 131 * 30
    print(
        f"cross_entropy as fixed + per element (131x30, 131x300): {fixed:.1f} µs + "
        f"{per_element * 1e3:.2f} ns per element"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

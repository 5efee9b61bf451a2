"""``torch-nki demo``: every library op on ragged shapes, eager and ``torch.compile(fullgraph=True)``,
compared with the ATen reference, and timed against it."""

from __future__ import annotations

import functools
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass

import torch

EPS = 1e-6


def rmsnorm_reference(x: torch.Tensor, weight: torch.Tensor, eps: float = EPS) -> torch.Tensor:
    """transformers' ``LlamaRMSNorm.forward`` in ATen ops."""
    h = x.to(torch.float32)
    variance = h.pow(2).mean(-1, keepdim=True)
    h = h * torch.rsqrt(variance + eps)
    return weight * h.to(x.dtype)


def _neuron_add(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    return torch.ops.neuron.add(x, y)


def _neuron_rmsnorm(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    return torch.ops.neuron.rmsnorm(x, w, EPS)


def _neuron_matmul(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    return torch.ops.neuron.matmul(x, w)


@dataclass(frozen=True)
class Case:
    """One op on one set of shapes: the neuron call, its ATen reference, and whether it is a
    matmul-class reduction (looser fp32 tolerance)."""

    op: str
    shapes: tuple[tuple[int, ...], ...]
    neuron: Callable[..., torch.Tensor]
    reference: Callable[..., torch.Tensor]
    matmul: bool = False


CASES = (
    Case("add", ((300, 1000), (300, 1000)), _neuron_add, lambda x, y: x + y),
    Case("rmsnorm", ((300, 1000), (1000,)), _neuron_rmsnorm, rmsnorm_reference),
    Case("matmul", ((300, 700), (700, 600)), _neuron_matmul, lambda x, w: x @ w, matmul=True),
)


def tolerance(dtype: torch.dtype, matmul: bool) -> tuple[float, float]:
    """``(rtol, atol)`` vs ATen (DESIGN §14)."""
    if dtype == torch.bfloat16:
        return 1.6e-2, 1e-2
    if dtype == torch.float16:
        return 1e-3, 1e-3
    return (1e-4, 1e-4) if matmul else (1e-5, 1e-5)


def within(actual: torch.Tensor, expected: torch.Tensor, rtol: float, atol: float) -> bool:
    """``|a - e| <= atol + rtol * |e|`` everywhere, compared in float64."""
    a, e = actual.double(), expected.double()
    return bool(((a - e).abs() <= atol + rtol * e.abs()).all())


def median_times(a: Callable[[], object], b: Callable[[], object], repeat: int) -> tuple[float, float]:
    """Median wall times of ``a()`` and ``b()`` in seconds: three rounds, each timing a block of
    calls of ``a`` and then a block of ``b`` (after one warm-up call of each), so drift on a
    shared machine affects both alike.

    Blocks rather than strict A/B alternation: ATen's OpenMP workers spin for a while after each
    ATen op and slow down a simulator call that follows immediately (see docs/cli.md); within a
    block only the first call pays that.
    """
    a()
    b()
    ta: list[float] = []
    tb: list[float] = []
    per_block = max(1, -(-repeat // 3))
    for _ in range(3):
        for fn, out in ((a, ta), (b, tb)):
            for _ in range(per_block):
                start = time.perf_counter()
                fn()
                out.append(time.perf_counter() - start)
    return statistics.median(ta), statistics.median(tb)


def _fmt_time(seconds: float) -> str:
    return f"{seconds * 1e3:8.3f} ms"


def run(compile: bool = True, repeat: int = 15) -> int:
    """Runs every case in fp32 and bf16; prints a table; returns 0 if every check passed."""
    gen = torch.Generator().manual_seed(0)
    failures = 0
    header = f"{'op':8} {'dtype':9} {'shape':24} {'mode':8} {'max abs err':>12} {'result':6}"
    print(header + f" {'neuron':>11} {'aten':>11} {'neuron/aten':>11}")
    print("-" * (len(header) + 36))
    for case in CASES:
        compiled = torch.compile(case.neuron, fullgraph=True) if compile else None
        for dtype in (torch.float32, torch.bfloat16):
            inputs = [(torch.rand(s, generator=gen) * 2 - 1).to(dtype) for s in case.shapes]
            expected = case.reference(*inputs)
            rtol, atol = tolerance(dtype, case.matmul)
            shape = " @ ".join("x".join(map(str, s)) for s in case.shapes)
            modes: list[tuple[str, Callable[..., torch.Tensor]]] = [("eager", case.neuron)]
            if compiled is not None:
                modes.append(("compile", compiled))
            for mode, fn in modes:
                actual = fn(*inputs)
                err = (actual.double() - expected.double()).abs().max().item()
                ok = actual.shape == expected.shape and actual.dtype == expected.dtype
                ok = ok and within(actual, expected, rtol, atol)
                failures += not ok
                verdict = "PASS" if ok else "FAIL"
                line = f"{case.op:8} {str(dtype)[6:]:9} {shape:24} {mode:8} {err:12.3e} {verdict:6}"
                t_neuron, t_aten = median_times(
                    functools.partial(fn, *inputs), functools.partial(case.reference, *inputs), repeat
                )
                line += f" {_fmt_time(t_neuron)} {_fmt_time(t_aten)} {t_neuron / t_aten:10.2f}x"
                print(line, flush=True)
    print(
        f"\n{'all checks passed' if not failures else f'{failures} check(s) FAILED'} "
        f"(tolerances: fp32 rtol=atol=1e-5, matmul 1e-4; bf16 rtol 1.6e-2 atol 1e-2)"
    )
    return 1 if failures else 0

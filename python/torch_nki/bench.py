"""``torch-nki bench``: every op graded at its declared ``bench(...)`` shape.

For each op with a reference: the cost model's estimated device time on the target, its bound
resource and roofline fraction (all **estimates**: nothing ran on Trainium), next to the CPU
simulator's time and ATen's time for the op's reference expression, measured side by side in
this run (alternating blocks, medians; see :func:`torch_nki.demo.median_times`).
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass

import torch

import torch_nki
from torch_nki import testing
from torch_nki.demo import median_times


@dataclass(frozen=True)
class Grade:
    """One op's row of the bench table."""

    op: str
    shapes: str
    dtype: str
    device_ns: float
    bound: str
    roofline_fraction: float
    simulator_s: float
    aten_s: float


def grade(op: str, target: str = "trn2", repeat: int = 3) -> Grade | None:
    """Grades one op at its bench shape; ``None`` if it declares none."""
    sample = testing.bench_input(op)
    if sample is None:
        return None
    report = torch_nki.cost(op, *sample.args, target=target)
    fn = getattr(torch.ops.neuron, op)
    sim, aten = median_times(
        functools.partial(fn, *sample.args), functools.partial(testing.reference, sample), repeat
    )
    shapes = ", ".join("x".join(map(str, t.shape)) for t in sample.tensors)
    return Grade(
        op=op,
        shapes=shapes,
        dtype=str(sample.dtype).removeprefix("torch."),
        device_ns=report.total_ns,
        bound=report.bound,
        roofline_fraction=report.roofline_fraction,
        simulator_s=sim,
        aten_s=aten,
    )


def _time(seconds: float) -> str:
    return f"{seconds * 1e3:9.2f} ms" if seconds >= 1e-3 else f"{seconds * 1e6:9.1f} µs"


def run(ops: Sequence[str] | None = None, target: str = "trn2", repeat: int = 3) -> int:
    """Prints the bench table for ``ops`` (default: every op with a bench shape); returns 0."""
    names = list(ops) if ops else [op for op in testing.ops_with_reference() if testing.bench_input(op)]
    unknown = [op for op in names if op not in torch_nki.ops()]
    if unknown:
        registered = ", ".join(torch_nki.ops())
        print(f"torch-nki bench: no kernel named {', '.join(unknown)} (registered: {registered})")
        return 2
    header = (
        f"{'op':10} {'shapes':24} {'dtype':9} {target + ' est.':>12} {'bound':7} {'roofline':>8} "
        f"{'cpu sim':>12} {'cpu aten':>12} {'sim/aten':>9}"
    )
    print(header)
    print("-" * len(header))
    for op in names:
        g = grade(op, target, repeat)
        if g is None:
            print(f"{op:10} (no bench(...) shape declared)")
            continue
        print(
            f"{g.op:10} {g.shapes:24} {g.dtype:9} {_time(g.device_ns / 1e9):>12} {g.bound:7} "
            f"{g.roofline_fraction:8.0%} {_time(g.simulator_s):>12} {_time(g.aten_s):>12} "
            f"{g.simulator_s / g.aten_s:8.1f}x",
            flush=True,
        )
    print(
        f"\ndevice times are cost-model estimates for one {target} NeuronCore (not measurements); "
        "cpu times are medians on this machine"
    )
    return 0

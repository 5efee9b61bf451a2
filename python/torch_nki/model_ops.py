"""Where a swapped model's time goes: the self CPU time of every op per step, for the model
unswapped and swapped, profiled in alternating steps so the machine's load moves both
(``torch-nki bench --by-op MODEL``).

The whole-model ratios (:mod:`torch_nki.model_bench`) say how far apart the two models are;
this table says which ops make the difference: ``neuron::linear`` against ``aten::mm``,
``neuron::flash_attention`` against ATen's attention, and the ATen ops a swapped model still
runs (the copies that make a strided input contiguous, the residual adds). Times are
``torch.profiler``'s self CPU time of the calling thread's ops, averaged over the steps; the
wall time per step is measured around the same profiled steps.
"""

from __future__ import annotations

import collections
import time
from collections.abc import Callable
from dataclasses import dataclass

import torch

from torch_nki import model_bench, workflow
from torch_nki.demo import torch_threads

__all__ = ["Breakdown", "measure", "run"]


@dataclass(frozen=True)
class Breakdown:
    """One model's per-op times, unswapped and swapped, in ms per step."""

    model: str
    case: str
    dtype: str
    steps: int
    #: op name -> ms per step, most expensive first.
    unswapped: dict[str, float]
    swapped: dict[str, float]
    #: Wall time per profiled step.
    unswapped_wall_ms: float
    swapped_wall_ms: float

    @property
    def ratio(self) -> float:
        """Swapped over unswapped wall time per step."""
        return self.swapped_wall_ms / self.unswapped_wall_ms

    def lines(self, top: int = 12) -> list[str]:
        """The table: the ``top`` ops of each side next to each other, then the totals."""
        left, right = list(self.unswapped.items())[:top], list(self.swapped.items())[:top]
        out = [
            f"self CPU time per step, {self.model} {self.case} {self.dtype} "
            f"({self.steps} profiled steps each, alternating; torch threads: {torch.get_num_threads()})",
            f"{'unswapped op':42} {'ms':>8}   {'swapped op':42} {'ms':>8}",
        ]
        for i in range(max(len(left), len(right))):
            a = f"{left[i][0][:42]:42} {left[i][1]:8.2f}" if i < len(left) else " " * 51
            b = f"{right[i][0][:42]:42} {right[i][1]:8.2f}" if i < len(right) else ""
            out.append(f"{a}   {b}".rstrip())
        totals = sum(self.unswapped.values()), sum(self.swapped.values())
        out.append(f"{'all ops':42} {totals[0]:8.2f}   {'all ops':42} {totals[1]:8.2f}")
        out.append(
            f"{'wall time per step':42} {self.unswapped_wall_ms:8.2f}   {'wall time per step':42} "
            f"{self.swapped_wall_ms:8.2f}   ratio {self.ratio:.2f}x   ({model_bench.load()})"
        )
        return out


def _profiled(step: Callable[[], object], into: collections.Counter[str]) -> float:
    """Runs ``step`` once under the profiler, adding each op's self CPU time (µs) to ``into``;
    returns the step's wall time in seconds."""
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
        start = time.perf_counter()
        step()
        wall = time.perf_counter() - start
    for event in prof.key_averages():
        into[event.key] += event.self_cpu_time_total
    return wall


def measure(
    name: str, dtype: str = "f32", train: bool = False, steps: int = 12, warm_up: int = 3
) -> Breakdown:
    """Profiles ``steps`` steps of ``name`` unswapped and swapped, alternating, after ``warm_up``
    unprofiled steps of each."""
    if steps < 1:
        raise ValueError(f"torch-nki bench --by-op: steps must be at least 1, got {steps}")
    model, swapped, ids = model_bench.pair(name, dtype, train)
    plain_step, swapped_step = model_bench.step(model, ids, train), model_bench.step(swapped, ids, train)
    for _ in range(warm_up):
        plain_step()
        swapped_step()
    totals: dict[str, collections.Counter[str]] = {
        "plain": collections.Counter(),
        "swapped": collections.Counter(),
    }
    walls = {"plain": 0.0, "swapped": 0.0}
    for _ in range(steps):
        walls["plain"] += _profiled(plain_step, totals["plain"])
        walls["swapped"] += _profiled(swapped_step, totals["swapped"])

    def per_step_ms(counter: collections.Counter[str]) -> dict[str, float]:
        return {op: us / steps / 1e3 for op, us in counter.most_common()}

    return Breakdown(
        model=name,
        case="train step" if train else "forward",
        dtype=dtype,
        steps=steps,
        unswapped=per_step_ms(totals["plain"]),
        swapped=per_step_ms(totals["swapped"]),
        unswapped_wall_ms=walls["plain"] / steps * 1e3,
        swapped_wall_ms=walls["swapped"] / steps * 1e3,
    )


def run(
    name: str, dtype: str = "f32", train: bool = False, steps: int = 12, threads: int | None = None
) -> int:
    """``torch-nki bench --by-op MODEL``: prints the table; 2 for an unknown model."""
    if name not in workflow.MODELS:
        print(f"torch-nki bench --by-op: unknown model {name} (known: {', '.join(workflow.MODELS)})")
        return 2
    if dtype not in ("f32", "bf16"):
        print(f"torch-nki bench --by-op: the models run in f32 or bf16, not {dtype}")
        return 2
    with torch_threads(threads):
        for line in measure(name, dtype, train, steps).lines():
            print(line)
    return 0

"""Whole-model ratios: a swapped transformers Llama (``torch_nki.swap``) against the same model
unswapped, forward in fp32 and bf16 and a training step (forward, loss, backward) in fp32, on
the machine as it is and with competing busy processes this module starts and stops itself, in
one run (issue 34's targets: forward <= 1.2x, training step <= 1.5x).

The two models are one model and its deep copy (same weights; the copy is swapped and verified
the way ``torch-nki swap`` does it), timed in alternating blocks (:func:`torch_nki.demo.
median_times`) so the machine's load moves both. ``torch-nki bench --models`` prints the table;
``torch-nki swap`` prints its model's rows.
"""

from __future__ import annotations

import copy
import os
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass

import torch

import torch_nki
from torch_nki import workflow
from torch_nki._dtypes import NKI_TO_TORCH
from torch_nki.demo import median_times, torch_threads

__all__ = ["CASES", "MODELS", "Ratio", "busy", "load", "measure", "pair", "print_ratios", "run", "step"]

#: The models ``torch-nki bench --models`` measures.
MODELS = ("llama-tiny", "llama-512")

#: (case, kernel dtype, target ratio): the forward in both dtypes, a training step in fp32.
CASES: tuple[tuple[str, str, float], ...] = (
    ("forward", "f32", 1.2),
    ("forward", "bf16", 1.2),
    ("train step", "f32", 1.5),
)


@contextmanager
def busy(n: int) -> Iterator[None]:
    """``n`` competing processes spinning on a core each, for the duration."""
    procs = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(n)]
    try:
        if procs:
            time.sleep(0.5)  # let them reach the scheduler
        yield
    finally:
        for p in procs:
            p.kill()
            p.wait()


def load() -> str:
    """The machine's load averages and core count, for the printed figures."""
    one, five, _ = os.getloadavg()
    return f"load average {one:.2f} (1 min), {five:.2f} (5 min), {os.cpu_count()} cores"


@dataclass(frozen=True)
class Ratio:
    """One measured row: median ms per call of the unswapped and the swapped model."""

    model: str
    case: str
    dtype: str
    machine: str
    unswapped_ms: float
    swapped_ms: float
    target: float

    @property
    def ratio(self) -> float:
        """Swapped over unswapped."""
        return self.swapped_ms / self.unswapped_ms

    def line(self) -> str:
        """The row as the table prints it."""
        verdict = "ok" if self.ratio <= self.target else "OVER"
        return (
            f"{self.model:11} {self.case:10} {self.dtype:5} {self.machine:14} {self.unswapped_ms:9.2f} ms "
            f"{self.swapped_ms:9.2f} ms {self.ratio:6.2f}x <= {self.target}x {verdict}"
        )


HEADER = (
    f"{'model':11} {'case':10} {'dtype':5} {'machine':14} "
    + f"{'unswapped':>12} {'swapped':>12} {'ratio':>7} target"
)


def pair(name: str, dtype: str, train: bool) -> tuple[torch.nn.Module, torch.nn.Module, torch.Tensor]:
    """The model (unswapped) and its swapped deep copy, and the batch. The copy is swapped with
    ``relayout=True`` (bias-free Linear weights stored K-major, as the tensor engine reads them:
    :func:`torch_nki.swap`), the fastest way the swap offers to run a model on the simulator."""
    model, ids = workflow.build(name, NKI_TO_TORCH[dtype])
    report = torch_nki.profile(model, ids, steps=1)
    swapped = copy.deepcopy(model)
    result = torch_nki.swap(swapped, report, relayout=True)
    if result.reverted:
        raise RuntimeError(f"{name} ({dtype}): swaps reverted: {[e.name for e in result.reverted]}")
    for m in (model, swapped):
        m.train(train)
    return model, swapped, ids


def step(model: torch.nn.Module, ids: torch.Tensor, train: bool) -> Callable[[], object]:
    """One step of ``model`` on ``ids`` as a callable: a forward without grad, or with ``train``
    a training step (forward with labels, loss, backward, gradients cleared)."""
    if not train:

        def forward() -> object:
            with torch.no_grad():
                return model(ids)

        return forward

    def step() -> object:
        loss = model(ids, labels=ids).loss
        loss.backward()
        model.zero_grad(set_to_none=True)
        return loss

    return step


def measure(
    models: Sequence[str] = MODELS,
    cases: Sequence[tuple[str, str, float]] = CASES,
    n_busy: int = 1,
    repeat: int = 9,
    threads: int | None = None,
    out: Callable[[str], None] = print,
) -> list[Ratio]:
    """Measures every case of every model as the machine is and with ``n_busy`` competing busy
    processes (0: only as it is), printing each row as it is measured; ``threads`` sets torch's
    intra-op threads for the run."""
    rows: list[Ratio] = []
    with torch_threads(threads):
        for name in models:
            for case, dtype, target in cases:
                train = case != "forward"
                model, swapped, ids = pair(name, dtype, train)
                states = [("as it is", 0)] + ([(f"{n_busy} busy", n_busy)] if n_busy > 0 else [])
                for machine, n in states:
                    with busy(n):
                        t_plain, t_swapped = median_times(
                            step(model, ids, train), step(swapped, ids, train), repeat
                        )
                        row = Ratio(name, case, dtype, machine, t_plain * 1e3, t_swapped * 1e3, target)
                        rows.append(row)
                        out(f"{row.line()}   ({load()})")
    return rows


def print_ratios(
    models: Sequence[str] = MODELS,
    n_busy: int = 1,
    repeat: int = 9,
    threads: int | None = None,
    cases: Sequence[tuple[str, str, float]] = CASES,
) -> list[Ratio]:
    """:func:`measure` under a header and a closing line saying whether every ratio is in."""
    print(
        "whole-model time, swapped (relayout=True) vs unswapped "
        f"(torch threads: {threads or torch.get_num_threads()})"
    )
    print(HEADER)
    rows = measure(models, cases, n_busy, repeat, threads)
    over = [r for r in rows if r.ratio > r.target]
    print("every ratio within its target" if not over else f"{len(over)} ratio(s) over their target")
    return rows


def run(n_busy: int = 1, threads: int | None = None, repeat: int = 9, models: Sequence[str] = MODELS) -> int:
    """``torch-nki bench --models``: prints the table; returns 0 (the ratios are reported, not
    asserted)."""
    unknown = [m for m in models if m not in workflow.MODELS]
    if unknown:
        print(f"torch-nki bench: unknown model {', '.join(unknown)} (known: {', '.join(workflow.MODELS)})")
        return 2
    print_ratios(models, n_busy, repeat, threads)
    return 0

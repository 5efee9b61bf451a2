"""llama-512 unswapped, swapped, and swapped with ``relayout=True`` (K-major Linear weights), in
one process, alternating: the median per-round ratio of each swap to the unswapped model, for a
forward without grad and for a training step (docs/swapping.md, "K-major weights").

    python scripts/bench_relayout.py [--rounds N] [--model NAME]
"""

from __future__ import annotations

import argparse
import copy
import os
import statistics
import time

import torch

import torch_nki
from torch_nki import model_bench, workflow


def measure(name: str, train: bool, rounds: int) -> None:
    model, ids = workflow.build(name, torch.float32)
    report = torch_nki.profile(model, ids, steps=1)
    default, relaid = copy.deepcopy(model), copy.deepcopy(model)
    torch_nki.swap(default, report)
    torch_nki.swap(relaid, report, relayout=True)
    models = {"unswapped": model, "swap()": default, "swap(relayout=True)": relaid}
    steps = {}
    for key, m in models.items():
        m.train(train)
        steps[key] = model_bench.step(m, ids, train)
    times: dict[str, list[float]] = {key: [] for key in steps}
    for _ in range(2):
        for step in steps.values():
            step()
    for _ in range(rounds):
        for key, step in steps.items():
            start = time.perf_counter()
            step()
            times[key].append(time.perf_counter() - start)
    case = "training step" if train else "forward"
    base = times["unswapped"]
    for key in ("swap()", "swap(relayout=True)"):
        ratio = statistics.median(t / b for t, b in zip(times[key], base, strict=True))
        print(
            f"{name} {case:13} {key:20} {statistics.median(times[key]) * 1e3:7.1f} ms, unswapped "
            f"{statistics.median(base) * 1e3:7.1f} ms: median ratio {ratio:.3f}"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=25, help="alternating rounds per case")
    parser.add_argument("--model", default="llama-512", choices=sorted(workflow.MODELS))
    args = parser.parse_args()
    measure(args.model, False, args.rounds)
    measure(args.model, True, max(1, args.rounds // 2))
    one, five, _ = os.getloadavg()
    print(f"load average {one:.2f} (1 min), {five:.2f} (5 min), {os.cpu_count()} cores")


if __name__ == "__main__":
    main()

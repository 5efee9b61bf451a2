"""How long ATen's intra-op threads keep running after a parallel region: one ``torch.add`` large
enough to run in parallel, then the calling thread waits ``gap`` ms in a busy loop; the process's
CPU time beyond that wait is what the other threads spent meanwhile (docs/bench.md, "A quiet
host while the machine is busy").

    python scripts/omp_spin.py
"""

from __future__ import annotations

import statistics
import time

import torch


def extra_cpu_ms(a: torch.Tensor, b: torch.Tensor, gap_ms: float) -> float:
    torch.add(a, b)
    start, cpu = time.perf_counter(), time.process_time()
    while time.perf_counter() - start < gap_ms / 1e3:
        pass
    return (time.process_time() - cpu) * 1e3 - gap_ms


def main() -> None:
    a, b = torch.randn(1 << 17), torch.randn(1 << 17)
    print(f"torch {torch.__version__}, {torch.get_num_threads()} intra-op threads")
    for gap in (1, 2, 5, 10, 20, 50):
        extra = statistics.median(extra_cpu_ms(a, b, gap) for _ in range(21))
        print(f"after a {gap:2} ms wait: {extra:5.2f} ms of CPU on the other threads (median of 21)")


if __name__ == "__main__":
    main()

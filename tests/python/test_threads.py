"""Concurrent calls from several Python threads (the simulator runs with the GIL released)."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import torch

from refs import rand

neuron = torch.ops.neuron


def test_concurrent_calls_match_sequential_results() -> None:
    cases = []
    for i in range(12):
        n = 17 + 29 * i
        cases.append(("add", (rand(n, 70), rand(n, 70))))
        cases.append(("rmsnorm", (rand(n, 130), rand(130), 1e-6)))
        cases.append(("matmul", (rand(n, 65), rand(65, 33 + i))))
    expected = [getattr(neuron, op)(*args) for op, args in cases]

    def call(i: int) -> torch.Tensor:
        op, args = cases[i % len(cases)]
        return getattr(neuron, op)(*args)

    with ThreadPoolExecutor(max_workers=8) as pool:
        results = list(pool.map(call, range(4 * len(cases))))
    for i, out in enumerate(results):
        assert torch.equal(out, expected[i % len(cases)]), cases[i % len(cases)][0]


def test_first_calls_race_on_the_compile_cache() -> None:
    # Fresh signatures: every thread may trace the same program concurrently; all must agree.
    x, w = rand(311, 97), rand(97, 45)
    with ThreadPoolExecutor(max_workers=6) as pool:
        results = list(pool.map(lambda _: neuron.matmul(x, w), range(12)))
    for out in results:
        assert torch.equal(out, results[0])

"""Concurrent calls from several Python threads (the simulator runs with the GIL released)."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import torch

from torch_nki import testing

from refs import rand

neuron = torch.ops.neuron


def test_concurrent_calls_match_sequential_results() -> None:
    cases = [s for op in testing.ops_with_reference() for s in testing.sample_inputs(op)]
    expected = [testing.call(s) for s in cases]

    def call(i: int) -> tuple[torch.Tensor, ...]:
        return testing.call(cases[i % len(cases)])

    with ThreadPoolExecutor(max_workers=8) as pool:
        results = list(pool.map(call, range(3 * len(cases))))
    for i, outs in enumerate(results):
        for a, b in zip(outs, expected[i % len(cases)], strict=True):
            assert torch.equal(a, b), str(cases[i % len(cases)])


def test_first_calls_race_on_the_compile_cache() -> None:
    # Fresh signatures: every thread may trace the same program concurrently; all must agree.
    x, w = rand(311, 97), rand(97, 45)
    with ThreadPoolExecutor(max_workers=6) as pool:
        results = list(pool.map(lambda _: neuron.matmul(x, w), range(12)))
    for out in results:
        assert torch.equal(out, results[0])
    torch.testing.assert_close(results[0], x @ w, rtol=1e-4, atol=1e-4)


def test_the_gil_is_released_while_the_simulator_runs() -> None:
    # While another thread runs one long kernel, the main thread keeps executing Python. Were the
    # GIL held for the native call, the main thread would stall for the whole kernel: its
    # longest pause between two loop iterations would be about the kernel's duration.
    import threading
    import time

    x, w = rand(1536, 1536), rand(1536, 1536)
    start = time.perf_counter()
    neuron.matmul(x, w)  # also compiles, so the measured call below only simulates
    duration = time.perf_counter() - start
    done = threading.Event()
    worker = threading.Thread(target=lambda: (neuron.matmul(x, w), done.set()))
    longest_pause, last = 0.0, time.perf_counter()
    worker.start()
    while not done.is_set():
        now = time.perf_counter()
        longest_pause, last = max(longest_pause, now - last), now
    worker.join()
    assert longest_pause < duration / 2, (
        f"main thread paused {longest_pause:.3f}s during a {duration:.3f}s kernel"
    )

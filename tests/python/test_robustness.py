"""Runtime robustness: the simulator works in forked processes, scalar cache keys are canonical
(NaN, signed zero), the compile cache is bounded, and ``require`` clauses are checked while
tracing under ``dynamic=True``."""

from __future__ import annotations

import multiprocessing
import os
import signal

import pytest
import torch

import torch_nki
from torch_nki.errors import ContractShapeError


def _parallel_add() -> bool:
    """A call whose row loop runs on the simulator's thread pool (two full 128-row tiles)."""
    x = torch.arange(256 * 8, dtype=torch.float32).reshape(256, 8)
    return bool(torch.equal(torch.ops.neuron.add(x, x), x + x))


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
def test_a_forked_child_runs_parallel_kernels() -> None:
    assert _parallel_add()  # the parent's pool exists now
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child
        signal.alarm(60)  # a hang kills the child instead of the test run
        code = 0 if _parallel_add() and _parallel_add() else 1
        os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert os.WIFEXITED(status), f"child did not exit normally (status {status}): hung or crashed"
    assert os.WEXITSTATUS(status) == 0


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
def test_a_forked_child_splits_runs_without_the_parent_s_aten_threads() -> None:
    """The parent's split runs use ATen's OpenMP threads, which a forked child does not have
    (a parallel region there waits for them forever); the child's split runs use the
    simulator's own pool. The child compares bytes: ATen's own parallel ops would hang."""
    from torch_nki import _native

    x = torch.rand(512, 512)
    expected = (x + x).numpy().tobytes()
    before = _native.split_min_work(0)  # every run split, in parent and child
    try:
        assert torch.ops.neuron.add(x, x).numpy().tobytes() == expected
        torch.add(x, x)  # ATen's team has run in the parent
        pid = os.fork()
        if pid == 0:  # pragma: no cover - the child
            signal.alarm(60)  # a hang kills the child instead of the test run
            same = all(torch.ops.neuron.add(x, x).numpy().tobytes() == expected for _ in range(5))
            os._exit(0 if same else 1)
        _, status = os.waitpid(pid, 0)
    finally:
        _native.split_min_work(before)
    assert os.WIFEXITED(status), f"child did not exit normally (status {status}): hung or crashed"
    assert os.WEXITSTATUS(status) == 0


def test_a_multiprocessing_fork_pool_runs_kernels() -> None:
    assert _parallel_add()
    with multiprocessing.get_context("fork").Pool(2) as pool:
        results = pool.starmap_async(_parallel_add, [()] * 4).get(timeout=120)
    assert results == [True] * 4


def test_nan_and_signed_zero_scalars_are_one_cache_entry_each() -> None:
    x, w = torch.rand(3, 24), torch.rand(24)
    before = torch_nki.cache_size()
    for _ in range(3):
        torch.ops.neuron.rmsnorm(x, w, float("nan"))
    assert torch_nki.cache_size() == before + 1
    a = torch.ops.neuron.rmsnorm(x, w, 0.0)
    b = torch.ops.neuron.rmsnorm(x, w, -0.0)
    assert torch_nki.cache_size() == before + 2
    assert torch.equal(a, b)


def _rss_bytes() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


@pytest.mark.skipif(not os.path.exists("/proc/self/statm"), reason="needs /proc")
def test_twenty_thousand_signatures_stay_within_the_cache_bound() -> None:
    """Stated bound: at most ``cache_capacity()`` programs are kept (1024 by default), and
    20 000 distinct signatures grow the process by less than 64 MiB (unbounded, the programs
    alone took over 100 MiB)."""
    capacity = torch_nki.cache_capacity()
    assert capacity == 1024
    x, w = torch.rand(2, 8), torch.rand(8)
    torch.ops.neuron.rmsnorm(x, w, 0.5)
    start = _rss_bytes()
    for i in range(20_000):
        torch.ops.neuron.rmsnorm(x, w, 1.0 + i)
        assert torch_nki.cache_size() <= capacity
    grown = _rss_bytes() - start
    assert grown < 64 * 2**20, f"grew by {grown / 2**20:.1f} MiB"


def test_cache_capacity_can_be_set_and_evicts_to_fit() -> None:
    old = torch_nki.cache_capacity()
    try:
        x, w = torch.rand(2, 8), torch.rand(8)
        for i in range(20):
            torch.ops.neuron.rmsnorm(x, w, 2.0 + i)
        assert torch_nki.cache_capacity(5) == 5
        assert torch_nki.cache_size() <= 5
        with pytest.raises(ValueError, match="at least 1"):
            torch_nki.cache_capacity(0)
        for bad in (-1, 2**64):  # not an OverflowError without a name
            with pytest.raises(ValueError, match=rf"cache_capacity: capacity must be at least 1 .*got {bad}"):
                torch_nki.cache_capacity(bad)
        with pytest.raises(TypeError, match="capacity must be an int, got float"):
            torch_nki.cache_capacity(2.5)  # type: ignore[arg-type]
    finally:
        torch_nki.cache_capacity(old)


def test_require_clauses_are_checked_while_tracing_dynamic_shapes() -> None:
    """rmsnorm requires D <= 16384. Under ``dynamic=True`` the fake kernel asserts it on the
    symbolic size, so breaking it fails while Dynamo traces (a ``TorchRuntimeError`` wrapping the
    contract error), not first when the kernel runs (a bare ``ContractShapeError``): on a first
    call, and on a call after a graph compiled for a valid D, whose guard the bad size fails."""

    def f(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
        return torch.ops.neuron.rmsnorm(x, w)

    traced_error = torch._dynamo.exc.TorchRuntimeError
    for warm_up in (False, True):
        torch._dynamo.reset()
        compiled = torch.compile(f, dynamic=True, fullgraph=True, backend="eager")
        if warm_up:
            assert compiled(torch.rand(3, 64), torch.rand(64)).shape == (3, 64)
        with pytest.raises(traced_error, match=r"ContractShapeError.*requires D <= 16384"):
            compiled(torch.rand(2, 16385), torch.rand(16385))
    torch._dynamo.reset()
    with pytest.raises(ContractShapeError, match=r"requires D <= 16384, but D = 16385"):
        f(torch.rand(2, 16385), torch.rand(16385))  # eager: the concrete check

"""``torch_nki.nki.benchmark``: NKI's ``nki.benchmark`` over the cost model, its profiler-style
summary, and ladders of kernels written here through the frontend; plus the matmul tutorial's
kernels from a real aws-neuron-sdk checkout when ``TORCH_NKI_CORPUS`` (or
``TORCH_NKI_SDK``) names one (CI has none)."""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import torch_nki.nki.isa as nisa
import torch_nki.nki.language as nl
from torch_nki import nki
from torch_nki.nki.perf import ProfileSummary


def _blocked_copy(f: int) -> Callable[..., Any]:
    """Loads ``x[128, C]`` in ``[128, f]`` blocks into one tile and stores it whole."""

    @nki.jit
    def blocked_copy(x):
        out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
        t = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.sbuf)
        for c in nl.affine_range(x.shape[1] // f):
            nisa.dma_copy(dst=t[:, c * f : c * f + f], src=x[:, c * f : c * f + f])
        nisa.dma_copy(dst=out, src=t)
        return out

    return blocked_copy


def _latency_us(kernel: Any, *arrays: np.ndarray, target: str = "trn2") -> float:
    bench = nki.benchmark(warmup=2, iters=3, target=target)(kernel)
    bench(*arrays)
    return float(bench.benchmark_result.nc_latency.get_latency_percentile(99))


def test_benchmark_mirrors_nki_and_fills_the_profiler_counters(tmp_path: Path) -> None:
    x = np.ones((128, 2048), np.float32)
    trace = tmp_path / "profile.json"
    bench = nki.benchmark(
        _blocked_copy(512), warmup=5, iters=10, save_neff_name="file.neff", save_trace_name=str(trace)
    )
    assert bench(x) is None
    result = bench.benchmark_result
    p50 = result.nc_latency.get_latency_percentile(50)
    assert p50 == result.nc_latency.get_latency_percentile(99) > 0
    profile = result.profile
    assert isinstance(profile, ProfileSummary)
    assert profile.total_time == pytest.approx(p50 / 1e6)
    # Four block loads and one store, each 128 partitions over the 16 DMA engines.
    assert profile.dma_transfer_count == 5
    assert profile.hbm_read_bytes == profile.hbm_write_bytes == x.nbytes
    assert profile.dma_transfer_total_bytes == 2 * x.nbytes
    assert profile.dma_transfer_average_bytes == pytest.approx(2 * x.nbytes / 5)
    assert profile.dma_throughput == pytest.approx(2 * x.nbytes / profile.total_time)
    assert 0 < profile.dma_active_time <= profile.total_time
    assert 0 < profile.dma_active_time_percent <= 100
    assert 0 < profile.mbu_estimated_percent <= 100
    # No compute: every engine idle, no matmul.
    assert profile.tensor_engine_instruction_count == profile.matmul_instruction_count == 0
    assert profile.vector_engine_active_time_percent == 0
    assert profile.to_dict()["hbm_read_bytes"] == x.nbytes
    assert "dma_active_time_percent" in str(profile) and "estimate" in str(profile)
    events = json.loads(trace.read_text())["traceEvents"]
    assert any(e.get("cat", "").startswith("dma") for e in events)
    assert not (tmp_path / "file.neff").exists()


def test_benchmark_counts_matmuls_and_engine_time() -> None:
    @nki.jit
    def mm(a, b):
        out = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.shared_hbm)
        s = nl.load(a)
        m = nl.load(b)
        acc = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.psum)
        nisa.nc_matmul(dst=acc, stationary=s, moving=m)
        res = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_copy(dst=res, src=acc)
        nl.store(out, value=res)
        return out

    bench = nki.benchmark(mm)
    bench(np.ones((128, 128), np.float32), np.ones((128, 512), np.float32))
    p = bench.benchmark_result.profile
    assert p.matmul_instruction_count == p.tensor_engine_instruction_count == 1
    assert p.vector_engine_instruction_count == 1
    assert p.hardware_flops == 2 * 128 * 128 * 512
    assert 0 < p.tensor_engine_active_time_percent < 100
    assert 0 < p.mfu_estimated_percent < 100


def test_bad_arguments_name_themselves() -> None:
    with pytest.raises(ValueError, match="benchmark: iters must be a non-negative int, got -1"):
        nki.benchmark(iters=-1)
    with pytest.raises(ValueError, match="benchmark: target must be 'trn1', 'trn2' or 'trn3', got 'trn9'"):
        nki.benchmark(target="trn9")
    bench = nki.benchmark(_blocked_copy(512))
    with pytest.raises(RuntimeError, match="call the benchmarked kernel first"):
        _ = bench.benchmark_result
    bench(np.ones((128, 512), np.float32))
    with pytest.raises(ValueError, match=r"percentile must be a number in 0\.\.100, got 101"):
        bench.benchmark_result.nc_latency.get_latency_percentile(101)


def test_fewer_larger_transfers_rank_faster() -> None:
    # The same 2 MiB loaded in blocks of 256 B .. 4 KiB per partition (the DMA overview's curve).
    x = np.ones((128, 4096), np.float32)
    for target in ("trn1", "trn2", "trn3"):
        times = [_latency_us(_blocked_copy(f), x, target=target) for f in (64, 256, 512, 1024)]
        assert times == sorted(times, reverse=True) and len(set(times)) == 4, (target, times)


def _scale_in_pieces(f: int) -> Callable[..., Any]:
    @nki.jit
    def scale(x):
        out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
        t = nl.load(x)
        for c in nl.affine_range(x.shape[1] // f):
            nisa.tensor_scalar(
                dst=t[:, c * f : c * f + f], data=t[:, c * f : c * f + f], op0=nl.multiply, operand0=2.0
            )
        nl.store(out, value=t)
        return out

    return scale


def test_longer_instructions_rank_faster_until_the_minimum_interval() -> None:
    x = np.ones((128, 4096), np.float32)
    busy = []
    for f in (8, 32, 128):
        bench = nki.benchmark(_scale_in_pieces(f))
        bench(x)
        busy.append(bench.benchmark_result.profile.vector_engine_active_time)
    assert busy[0] > busy[1] > busy[2], busy


def _corpus_matmul_source() -> Path | None:
    for var in ("TORCH_NKI_SDK", "TORCH_NKI_CORPUS"):
        root = os.environ.get(var)
        if not root:
            continue
        base = Path(root)
        for candidate in (
            base / "nki/examples/matrix_multiplication/matrix_multiplication_nki_kernels.py",
            base / "examples/matrix_multiplication/matrix_multiplication_nki_kernels.py",
            base / "matrix_multiplication/matrix_multiplication_nki_kernels.py",
        ):
            if candidate.is_file():
                return candidate
    return None


def test_the_matmul_tutorial_ranks_in_its_documented_order() -> None:
    """aws-neuron-sdk's matmul tutorial, unmodified: each step (hoisted loads, blocked free
    dimensions, fully optimised) is documented as faster than the one before."""
    source = _corpus_matmul_source()
    if source is None:
        pytest.skip(
            "set TORCH_NKI_CORPUS (or TORCH_NKI_SDK) to an aws-neuron-sdk checkout or its nki/examples"
            " to rank the matmul tutorial's kernels"
        )
    import ml_dtypes

    module = nki.load_source(source.read_text(), "matrix_multiplication_nki_kernels")
    lhs_t = np.zeros((1024, 4096), ml_dtypes.bfloat16)
    rhs = np.zeros((1024, 2048), ml_dtypes.bfloat16)
    ladder = [
        "nki_matmul_tiled_",
        "nki_matmul_hoist_load_",
        "nki_matmul_block_free_dimension_",
        "nki_matmul_fully_optimized_",
    ]
    for target in ("trn1", "trn2"):
        times = [_latency_us(getattr(module, name), lhs_t, rhs, target=target) for name in ladder]
        print(target, dict(zip(ladder, times, strict=True)))
        for i in range(1, len(ladder)):
            (slow, a), (fast, b) = (ladder[i - 1], times[i - 1]), (ladder[i], times[i])
            assert b < a, f"{target}: {fast} ({b:.1f} µs) is not faster than {slow} ({a:.1f} µs)"

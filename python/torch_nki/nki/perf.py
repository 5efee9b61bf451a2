"""``nki.benchmark(kernel)(*arrays)`` and a profile-style summary, from the cost model.

NKI's ``nki.benchmark`` (NKI before 0.2) compiled a kernel, ran it ``iters`` times on a
NeuronCore and left the latency on the returned function's ``benchmark_result.nc_latency``
(``get_latency_percentile(p)``, in microseconds). Here nothing runs on a device: the kernel is
traced for the arrays' shapes and dtypes, validated, and its program estimated by the cost
model (docs/cost-model.md), so every percentile is the same **estimate**.

    >>> bench = nki.benchmark(warmup=5, iters=10)(my_kernel)
    >>> bench(a, b)
    >>> bench.benchmark_result.nc_latency.get_latency_percentile(99)   # µs, an estimate
    >>> print(bench.benchmark_result.profile)   # counters named as the Neuron profiler's

``benchmark_result.profile`` is a :class:`ProfileSummary`: the Neuron Explorer summary
counters (``total_time``, ``dma_active_time_percent``, ``hbm_read_bytes``,
``tensor_engine_active_time_percent``, ``vector_engine_instruction_count``, ...) with the
profiler's names and units (seconds, percent, bytes), so a user with a device can compare the
two column by column. ``save_trace_name`` writes the estimate's timeline as a Perfetto / Chrome
trace JSON (the profiler writes an NTFF there; no NEFF is produced, so ``save_neff_name`` is
accepted and nothing is written).
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

__all__ = ["BenchmarkResult", "Benchmarked", "Latency", "ProfileSummary", "benchmark", "profile_summary"]

_ENGINES = ("tensor", "vector", "scalar", "gpsimd")


@dataclass(frozen=True)
class ProfileSummary:
    """The Neuron profiler's summary counters for one kernel, estimated (times in seconds,
    fractions in percent, as the profiler reports them)."""

    kernel: str
    target: str
    total_time: float
    """Estimated device time, seconds."""
    dma_active_time: float
    """Time at least one DMA engine is transferring, seconds."""
    dma_active_time_percent: float
    dma_transfer_count: int
    """DMA instructions (each spans one or more of the 16 DMA engines)."""
    dma_transfer_total_bytes: float
    """HBM bytes the transfers moved (read and written)."""
    dma_transfer_average_bytes: float
    dma_throughput: float
    """HBM bytes moved over ``total_time``, bytes per second."""
    hbm_read_bytes: float
    hbm_write_bytes: float
    hardware_flops: float
    mfu_estimated_percent: float
    """The tensor engine's time at peak for the matmuls over the estimated time."""
    mbu_estimated_percent: float
    """HBM bytes moved over ``total_time`` against the peak DMA bandwidth."""
    tensor_engine_active_time: float
    tensor_engine_active_time_percent: float
    tensor_engine_instruction_count: int
    matmul_instruction_count: int
    vector_engine_active_time: float
    vector_engine_active_time_percent: float
    vector_engine_instruction_count: int
    scalar_engine_active_time: float
    scalar_engine_active_time_percent: float
    scalar_engine_instruction_count: int
    gpsimd_engine_active_time: float
    gpsimd_engine_active_time_percent: float
    gpsimd_engine_instruction_count: int

    def to_dict(self) -> dict[str, Any]:
        """The counters as a dict (the profiler's names as keys)."""
        return asdict(self)

    def __str__(self) -> str:
        lines = [f"{self.kernel} on {self.target} (estimate, not a measurement)"]
        for name, value in self.to_dict().items():
            if name in ("kernel", "target"):
                continue
            if isinstance(value, float) and (name.endswith("_time") or name == "total_time"):
                text = f"{value * 1e6:.3f} µs"
            elif name.endswith("_percent"):
                text = f"{value:.1f}%"
            elif isinstance(value, float):
                text = f"{value:.6g}"
            else:
                text = str(value)
            lines.append(f"  {name:<36} {text}")
        return "\n".join(lines)


def _dma_union_ns(trace_json: str) -> float:
    """Time at least one DMA engine track of the trace is busy, ns."""
    events = json.loads(trace_json)["traceEvents"]
    spans = sorted(
        (e["ts"] * 1e3, (e["ts"] + e["dur"]) * 1e3)
        for e in events
        if e.get("ph") == "X" and str(e.get("cat", "")).startswith("dma")
    )
    total, end = 0.0, float("-inf")
    for lo, hi in spans:
        if lo > end:
            total += hi - lo
            end = hi
        elif hi > end:
            total += hi - end
            end = hi
    return total


def _count(trace_json: str, name: str) -> int:
    events = json.loads(trace_json)["traceEvents"]
    return sum(1 for e in events if e.get("ph") == "X" and e.get("name") == name)


def profile_summary(summary_json: str, trace_json: str) -> ProfileSummary:
    """The profiler-style counters of a native cost summary and its Chrome trace (the second and
    third items of ``Program.cost()``)."""
    s = json.loads(summary_json)
    total_ns = float(s["total_ns"])
    busy: dict[str, tuple[float, int]] = {}
    for e in s["engines"]:
        engine = e["engine"]
        name = engine if isinstance(engine, str) else "dma"
        if name in _ENGINES:
            busy[name] = (float(e["busy_ns"]), int(e["instructions"]))
    hbm = float(s["hbm_read_bytes"]) + float(s["hbm_write_bytes"])
    transfers = int(s.get("dma_transfers", 0))
    dma_ns = _dma_union_ns(trace_json)
    peak = float(s.get("dma_peak_bytes_per_s", 0.0))
    tensor_min = dict((str(k), float(v)) for k, v in s["min_ns"]).get("tensor", 0.0)

    def pct(ns: float) -> float:
        return 100.0 * ns / total_ns if total_ns > 0 else 0.0

    def engine_use(name: str) -> tuple[float, float, int]:
        ns, count = busy.get(name, (0.0, 0))
        return ns / 1e9, pct(ns), count

    t, v, sc, g = (engine_use(n) for n in _ENGINES)
    seconds = total_ns / 1e9
    return ProfileSummary(
        kernel=str(s["kernel"]),
        target=str(s["target"]),
        total_time=seconds,
        dma_active_time=dma_ns / 1e9,
        dma_active_time_percent=pct(dma_ns),
        dma_transfer_count=transfers,
        dma_transfer_total_bytes=hbm,
        dma_transfer_average_bytes=hbm / transfers if transfers else 0.0,
        dma_throughput=hbm / seconds if seconds > 0 else 0.0,
        hbm_read_bytes=float(s["hbm_read_bytes"]),
        hbm_write_bytes=float(s["hbm_write_bytes"]),
        hardware_flops=float(s["flops"]),
        mfu_estimated_percent=pct(tensor_min),
        mbu_estimated_percent=100.0 * hbm / seconds / peak if seconds > 0 and peak > 0 else 0.0,
        tensor_engine_active_time=t[0],
        tensor_engine_active_time_percent=t[1],
        tensor_engine_instruction_count=t[2],
        matmul_instruction_count=_count(trace_json, "nc_matmul") + _count(trace_json, "nc_matmul_mx"),
        vector_engine_active_time=v[0],
        vector_engine_active_time_percent=v[1],
        vector_engine_instruction_count=v[2],
        scalar_engine_active_time=sc[0],
        scalar_engine_active_time_percent=sc[1],
        scalar_engine_instruction_count=sc[2],
        gpsimd_engine_active_time=g[0],
        gpsimd_engine_active_time_percent=g[1],
        gpsimd_engine_instruction_count=g[2],
    )


@dataclass(frozen=True)
class Latency:
    """``benchmark_result.nc_latency``: the estimated NeuronCore latency."""

    estimate_us: float

    def get_latency_percentile(self, percentile: int) -> float:
        """The latency at ``percentile`` (0..100), µs. The model is deterministic, so every
        percentile is the estimate."""
        if (
            isinstance(percentile, bool)
            or not isinstance(percentile, (int, float))
            or not 0 <= percentile <= 100
        ):
            raise ValueError(
                f"get_latency_percentile: percentile must be a number in 0..100, got {percentile!r}"
            )
        return self.estimate_us


@dataclass(frozen=True)
class BenchmarkResult:
    """What :func:`benchmark` leaves on the benchmarked function after a call."""

    nc_latency: Latency
    profile: ProfileSummary
    report: str
    """The cost model's text report."""
    trace_json: str
    """The estimate's timeline (Perfetto / Chrome trace JSON)."""


class Benchmarked:
    """A kernel wrapped by :func:`benchmark`: calling it estimates one call and stores the
    result on :attr:`benchmark_result`."""

    def __init__(
        self, kernel: Any, *, warmup: int, iters: int, target: str | None, save_trace_name: str | None
    ) -> None:
        self.kernel = kernel
        self.warmup = warmup
        self.iters = iters
        self.target = target
        self.save_trace_name = save_trace_name
        self._result: BenchmarkResult | None = None

    @property
    def benchmark_result(self) -> BenchmarkResult:
        """The last call's result (a ``RuntimeError`` before the first call)."""
        if self._result is None:
            raise RuntimeError("benchmark_result: call the benchmarked kernel first")
        return self._result

    def __call__(self, *args: Any, **kwargs: Any) -> None:
        from torch_nki import nki

        target = self.target if self.target is not None else nki.unpinned_target()
        kernel = self.kernel
        if not isinstance(kernel, (nki.Kernel, nki.Launch)):
            kernel = nki.Kernel(kernel)
        program = kernel.trace(*args, target=target, **kwargs)
        text, summary, trace = program.cost()
        profile = profile_summary(summary, trace)
        self._result = BenchmarkResult(
            nc_latency=Latency(profile.total_time * 1e6),
            profile=profile,
            report=text,
            trace_json=trace,
        )
        if self.save_trace_name is not None:
            Path(self.save_trace_name).write_text(trace)


def benchmark(
    kernel: Any = None,
    *,
    warmup: int = 5,
    iters: int = 10,
    target: str | None = None,
    save_neff_name: str | None = None,
    save_trace_name: str | None = None,
    **options: Any,
) -> Any:
    """``nki.benchmark(kernel)`` or ``nki.benchmark(warmup=..., iters=...)(kernel)``: a callable
    that estimates the kernel's latency for the arrays it is called with (see the module doc).
    ``target`` picks the generation (``trn1``, ``trn2``, ``trn3``; the frontend's default
    otherwise). ``warmup`` and ``iters`` are accepted for NKI's signature (an estimate needs
    neither); other NKI options (``additional_compile_opt``, ...) are accepted and ignored."""
    for name, value in (("warmup", warmup), ("iters", iters)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise ValueError(f"benchmark: {name} must be a non-negative int, got {value!r}")
    if target is not None and target not in ("trn1", "trn2", "trn3"):
        raise ValueError(f"benchmark: target must be 'trn1', 'trn2' or 'trn3', got {target!r}")
    del save_neff_name, options

    def wrap(fn: Any) -> Benchmarked:
        return Benchmarked(fn, warmup=warmup, iters=iters, target=target, save_trace_name=save_trace_name)

    if kernel is None:
        return wrap
    return wrap(kernel)

"""``torch_nki.cost(op, *args, target=...)``: what an op would take on a NeuronCore, from the cost model.

The kernel is compiled for the arguments' shapes and dtypes on the chosen target (through
``torch_nki.kernel(op).signature(...)``, see :mod:`torch_nki._signature`) (``trn1``,
``trn2``, ``trn3``) and its program is scheduled on the engines with the documented heuristics
(see docs/cost-model.md). Tensors are only looked at for their shape and dtype, so ``meta``
tensors work. Every figure is an **estimate**: nothing here ran on Trainium.

    >>> report = torch_nki.cost("rmsnorm", torch.empty(8192, 4096, dtype=torch.bfloat16, device="meta"),
    ...                         torch.empty(4096, dtype=torch.bfloat16, device="meta"))
    >>> print(report)            # time, bound resource, roofline fraction, engine utilisation
    >>> report.write_trace("rmsnorm.json")  # open in https://ui.perfetto.dev
    >>> report.write_plot("rmsnorm.png")    # timeline per engine and the roofline (matplotlib)
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

__all__ = ["CostReport", "cost"]


@dataclass(frozen=True)
class CostReport:
    """The cost model's estimate for one call."""

    op: str
    target: str
    total_ns: float
    """Estimated device time, ns."""
    bound: str
    """The resource whose peak-rate time is largest (``dma``, ``tensor``, ``vector``, ``scalar``)."""
    roofline_fraction: float
    """That resource's time at peak over the estimated time (1.0 = at the roofline)."""
    hbm_roofline_fraction: float
    """Every tensor the kernel touches moved once at peak HBM bandwidth, over the estimated time:
    the op's HBM roofline fraction (repeated reads count against it, not as work)."""
    hbm_compulsory_bytes: float
    """Bytes of every tensor the kernel reads or writes, each counted once."""
    min_ns: dict[str, float]
    """Each resource's time at its peak rate for the program's work, ns (the roofline)."""
    busy_ns: dict[str, float]
    """Busy time per engine and DMA engine (``tensor``, ``vector``, ``scalar``, ``gpsimd``, ``dma0``...)."""
    hbm_read_bytes: float
    hbm_write_bytes: float
    flops: float
    instructions: int
    text: str = field(repr=False)
    trace_json: str = field(repr=False)
    core_ns: tuple[float, ...] = ()
    """With a launch grid spread over the physical cores of a logical NeuronCore (LNC=2 on Trn2
    and Trn3): each core's estimated time, ns (``total_ns`` is the largest); empty on one core."""

    @property
    def cores(self) -> int:
        """How many physical cores the kernel's launch uses (1 for a kernel that does not split
        its work by program id, or on Trn1)."""
        return max(1, len(self.core_ns))

    def __str__(self) -> str:
        return self.text

    @property
    def tensor_peak_fraction(self) -> float:
        """The tensor engine's time at peak for the matmuls over the estimated time (the grade of
        matmul-like kernels whatever their bound resource)."""
        return self.min_ns.get("tensor", 0.0) / self.total_ns if self.total_ns else 0.0

    def utilisation(self, engine: str) -> float:
        """Busy time of ``engine`` over the estimated time."""
        return self.busy_ns.get(engine, 0.0) / self.total_ns if self.total_ns else 0.0

    def write_trace(self, path: str | Path) -> Path:
        """Writes the Chrome/Perfetto trace JSON (one track per engine and DMA engine)."""
        out = Path(path)
        out.write_text(self.trace_json)
        return out

    def write_plot(self, path: str | Path) -> Path:
        """Writes a PNG: the per-engine timeline and the roofline (needs ``matplotlib``)."""
        from torch_nki._plot import write_cost_plot

        return write_cost_plot(self, Path(path))


def _engine_name(engine: Any) -> str:
    if isinstance(engine, dict):  # {"dma": n}
        ((kind, n),) = engine.items()
        return f"{kind}{n}"
    return str(engine)


def report(op: str, text: str, summary: str, trace: str) -> CostReport:
    """The report of the native ``Signature.cost``'s ``(text, summary_json, trace_json)``."""
    s = json.loads(summary)
    return CostReport(
        op=op,
        target=s["target"],
        total_ns=s["total_ns"],
        bound=s["bound"],
        roofline_fraction=s["roofline_fraction"],
        hbm_roofline_fraction=s["hbm_roofline_fraction"],
        hbm_compulsory_bytes=s["hbm_compulsory_bytes"],
        min_ns={str(name): float(ns) for name, ns in s["min_ns"]},
        busy_ns={_engine_name(e["engine"]): e["busy_ns"] for e in s["engines"]},
        hbm_read_bytes=s["hbm_read_bytes"],
        hbm_write_bytes=s["hbm_write_bytes"],
        flops=s["flops"],
        instructions=s["instructions"],
        text=text,
        trace_json=trace,
        core_ns=tuple(float(ns) for ns in s.get("core_ns", ())),
    )


def cost(op: str, *args: Any, target: str = "trn2", **kwargs: Any) -> CostReport:
    """Estimates ``torch.ops.neuron.<op>(*args, **kwargs)`` on ``target`` with the cost model
    (``ns::name`` for an op of a kernel crate loaded into another namespace): ``torch_nki.kernel(op)
    .signature(*args, **kwargs).cost(target)``."""
    from torch_nki._signature import kernel

    return kernel(op).signature(*args, **kwargs).cost(target)

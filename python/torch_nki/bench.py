"""``torch-nki bench``: every op graded at its declared ``bench(...)`` shape.

For every registered op: the cost model's estimated device time on the target, its bound
resource and roofline fraction, and its HBM roofline fraction (every tensor moved once at peak
bandwidth over the estimated time; all **estimates**: nothing ran on Trainium), next to the CPU
simulator's time and ATen's time for the same work, measured side by side in this run
(alternating blocks, medians; see :func:`torch_nki.demo.median_times`). A forward op runs at its
``bench(...)`` shape against its reference expression; a backward kernel runs at its forward's
bench shape against torch autograd of the forward's reference.
"""

from __future__ import annotations

import functools
import os
import re
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import torch

import torch_nki
from torch_nki import testing
from torch_nki.demo import median_times


@dataclass(frozen=True)
class Grade:
    """One op's row of the bench table."""

    op: str
    shapes: str
    dtype: str
    device_ns: float
    bound: str
    roofline_fraction: float
    hbm_fraction: float
    simulator_s: float
    aten_s: float


def _aten_backward(forward: testing.SampleInput, backward: testing.SampleInput) -> Callable[[], object]:
    """Torch autograd of the forward's reference at the same point, with the same output
    gradients the backward kernel receives: what the backward kernel replaces."""
    leaves = tuple(
        a.detach().requires_grad_(True) if isinstance(a, torch.Tensor) and a.is_floating_point() else a
        for a in forward.args
    )
    outs = testing.reference(forward, leaves)
    fwd = testing.op_spec(forward.op)
    if fwd.backward is None:
        raise ValueError(f"{fwd.qualname} declares no backward kernel")
    by_output = fwd.backward.output_gradients(backward.args, fwd.num_outputs)
    grads = [g for o, g in zip(fwd.outputs, by_output, strict=True) if not o.saved]
    inputs = [a for a in leaves if isinstance(a, torch.Tensor) and a.requires_grad]

    def run() -> object:
        return torch.autograd.grad(outs, inputs, grads, retain_graph=True)

    return run


def _bench_call(
    op: str, dtype: torch.dtype | None = None
) -> tuple[testing.SampleInput, Callable[[], object]] | None:
    """The op's bench arguments and the ATen work it is timed against: its reference at its
    ``bench(...)`` shape, or, for a backward kernel, autograd of its forward's reference at the
    forward's bench shape."""
    samples = testing.bench_inputs(op, dtype=dtype)
    if samples is None:
        return None
    sample, forward = samples
    if forward is None:
        return sample, functools.partial(testing.reference, sample)
    return sample, _aten_backward(forward, sample)


def grade(op: str, target: str = "trn2", repeat: int = 3, dtype: torch.dtype | None = None) -> Grade | None:
    """Grades one op at its bench shape (a backward kernel at its forward's), in its bench dtype
    or ``dtype``; ``None`` if there is none."""
    call = _bench_call(op, dtype)
    if call is None:
        return None
    sample, aten_fn = call
    report = torch_nki.cost(op, *sample.args, target=target)
    fn = getattr(torch.ops.neuron, op)
    sim, aten = median_times(functools.partial(fn, *sample.args), aten_fn, repeat)
    shapes = ", ".join("x".join(map(str, t.shape)) or "[]" for t in sample.tensors)
    return Grade(
        op=op,
        shapes=shapes,
        dtype=str(sample.dtype).removeprefix("torch."),
        device_ns=report.total_ns,
        bound=report.bound,
        roofline_fraction=report.roofline_fraction,
        hbm_fraction=report.hbm_roofline_fraction,
        simulator_s=sim,
        aten_s=aten,
    )


def _time(seconds: float) -> str:
    return f"{seconds * 1e3:9.2f} ms" if seconds >= 1e-3 else f"{seconds * 1e6:9.1f} µs"


def run(
    ops: Sequence[str] | None = None, target: str = "trn2", repeat: int = 3, dtype: torch.dtype | None = None
) -> int:
    """Prints the bench table for ``ops`` (default: every op with a bench shape) in each op's
    bench dtype or ``dtype``; returns 0."""
    names = list(ops) if ops else torch_nki.ops()
    unknown = [op for op in names if op not in torch_nki.ops()]
    if unknown:
        registered = ", ".join(torch_nki.ops())
        print(f"torch-nki bench: no kernel named {', '.join(unknown)} (registered: {registered})")
        return 2
    header = (
        f"{'op':17} {'shapes':38} {'dtype':9} {target + ' est.':>12} {'bound':7} {'roofline':>8} {'HBM':>4} "
        f"{'cpu sim':>12} {'cpu aten':>12} {'sim/aten':>9}"
    )
    print(header)
    print("-" * len(header))
    for op in names:
        g = grade(op, target, repeat, dtype)
        if g is None:
            print(f"{op:17} (no bench(...) shape declared)")
            continue
        print(
            f"{g.op:17} {g.shapes:38} {g.dtype:9} {_time(g.device_ns / 1e9):>12} {g.bound:7} "
            f"{g.roofline_fraction:8.0%} {g.hbm_fraction:4.0%} {_time(g.simulator_s):>12} "
            f"{_time(g.aten_s):>12} {g.simulator_s / g.aten_s:8.1f}x",
            flush=True,
        )
    print(
        f"\ndevice times are cost-model estimates for one {target} NeuronCore (not measurements); "
        "cpu times are medians on this machine"
    )
    print(allocation_note())
    return 0


def allocation_note(thp_path: str = "/sys/kernel/mm/transparent_hugepage/enabled") -> str:
    """How the two sides' large outputs are backed in this process, which the CPU times include
    (first-touch page faults of a fresh output can cost as much as a memory-bound op). Both
    sides only advise huge pages; where the kernel's transparent huge pages are off (or not
    known: no ``thp_path``), the advice does nothing. On Linux the simulator also faults its
    large outputs in before each run (``MADV_POPULATE_WRITE``), which the note says too."""
    ahead = "; the simulator's are faulted in before each run" if sys.platform.startswith("linux") else ""
    try:
        with open(thp_path) as f:
            thp_off = "[never]" in f.read()
    except OSError:
        thp_off = True
    if thp_off:
        both = "4 KiB pages on both sides (transparent huge pages are off)"
        return f"large outputs are backed by {both}{ahead}"
    ours = "huge pages" if torch_nki._native.huge_pages() else "4 KiB pages (TORCH_NKI_HUGE_PAGES=0)"
    theirs = (
        "huge pages (THP_MEM_ALLOC_ENABLE set)"
        if _torch_thp_enabled(os.environ.get("THP_MEM_ALLOC_ENABLE"))
        else "4 KiB pages (THP_MEM_ALLOC_ENABLE unset)"
    )
    size = f"{torch_nki._native.HUGE_PAGES_MIN_BYTES >> 20} MiB and more"
    return f"large outputs ({size}) are backed by {ours} for the simulator and by {theirs} for ATen{ahead}"


def _torch_thp_enabled(value: str | None) -> bool:
    """torch's reading of ``THP_MEM_ALLOC_ENABLE``: C's ``atoi`` of the value, non-zero is on."""
    digits = re.match(r"\s*[+-]?\d+", value or "")
    return digits is not None and int(digits.group()) != 0

"""``torch-nki table``: the table of every op, generated from the registry — contract, dtypes,
backward kernel, what it replaces, and its grade (the cost model's estimate on Trn2 at the op's
``bench(...)`` shape: time, bound, roofline fraction, HBM roofline fraction). ``docs/ops.md`` is
this table; a test keeps it current."""

from __future__ import annotations

import torch_nki
from torch_nki import testing

HEADER = """# Ops

Generated from the registry by `torch-nki table -o docs/ops.md` (do not edit; a test checks it is
current). Grades are the cost model's estimates for one Trn2 logical NeuronCore (LNC=2: two
physical cores sharing HBM) at each op's `bench(...)` shape in bf16 (a backward kernel at its
forward's), not measurements; each grade says how many of the two cores the kernel's launch uses
(a kernel that does not split its work by program id runs on one). CPU simulator times next to
ATen's are in [bench.md](bench.md).

| op | contract | dtypes | backward | replaces | grade (trn2) |
|---|---|---|---|---|---|
"""


def _bench_args(op: str) -> testing.SampleInput | None:
    """The op's bench arguments as meta tensors (a backward kernel's from its forward's)."""
    inputs = testing.bench_inputs(op, make=testing.meta)
    return None if inputs is None else inputs[0]


def _grade(op: str, target: str) -> str:
    sample = _bench_args(op)
    if sample is None:
        return "(no bench shape)"
    report = torch_nki.cost(op, *sample.args, target=target)
    us = report.total_ns / 1e3
    time = f"{us / 1e3:.2f} ms" if us >= 1000 else f"{us:.1f} µs"
    cores = f"{report.cores} core{'s' if report.cores > 1 else ''}"
    grade = (
        f"{time} on {cores}, {report.bound}-bound, {report.roofline_fraction:.0%} of roofline, "
        f"{report.hbm_roofline_fraction:.0%} of HBM roofline"
    )
    if report.flops:
        grade += f", tensor engine {report.tensor_peak_fraction:.0%} of peak"
    return grade


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


def markdown(target: str = "trn2") -> str:
    """The table as Markdown (see the module doc)."""
    rows = []
    for op in torch_nki.ops():
        spec = testing.op_spec(op)
        if spec.backward:
            backward = f"`{spec.backward.kernel}`"
        elif spec.backward_of:
            backward = f"(backward of `{spec.backward_of}`)"
        else:
            backward = "none"
        replaces = ", ".join(f"`{r}`" for r in spec.replaces) or "—"
        cells = [
            f"`{op}`",
            f"`{_cell(spec.contract_text)}`",
            f"`{_cell(spec.dtype_text)}`",
            backward,
            _cell(replaces),
            _grade(op, target),
        ]
        rows.append("| " + " | ".join(cells) + " |\n")
    return HEADER + "".join(rows)

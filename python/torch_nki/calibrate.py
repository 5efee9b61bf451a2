"""``torch-nki calibrate FILE.json``: the cost model against device measurements.

Each case names an NKI source file, a kernel in it, its inputs' shapes and dtypes, the target
and the latency measured on a device (and optionally the Neuron profiler's summary counters
of that run). The kernel is traced through the NKI frontend and estimated; the report gives each
case's estimate, its ratio to the measurement, the geometric mean of the ratios over all cases,
and the cost-table constants that dominate each estimate (its critical path charged to the
constants that set it, see docs/cost-model.md).

The file::

    {"cases": [
      {"name": "tiled",                      # optional; the kernel's name by default
       "source": "kernels/matmul.py",         # relative to the JSON file's directory
       "kernel": "nki_matmul_tiled_",
       "inputs": [{"shape": [1024, 4096], "dtype": "bfloat16"},
                  {"shape": [1024, 2048], "dtype": "bfloat16"}],
       "kwargs": {},                          # optional scalar arguments
       "target": "trn1",
       "measured_us": 463.0,
       "counters": {"hbm_read_bytes": 1.7e8}} # optional profiler counters, compared by name
    ]}
"""

from __future__ import annotations

import argparse
import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

__all__ = [
    "CalibrationError",
    "Case",
    "CaseResult",
    "Report",
    "add_arguments",
    "calibrate",
    "load_cases",
    "run",
]

_TARGETS = ("trn1", "trn2", "trn3")


class CalibrationError(ValueError):
    """A calibration file or case that cannot be used, naming the case and the field."""


@dataclass(frozen=True)
class Case:
    """One measured kernel call."""

    name: str
    source: Path
    kernel: str
    inputs: tuple[tuple[tuple[int, ...], str], ...]
    target: str
    measured_us: float
    kwargs: dict[str, Any] = field(default_factory=dict)
    counters: dict[str, float] = field(default_factory=dict)
    index: int = 0
    """Its position in the file."""

    @property
    def where(self) -> str:
        """How errors name the case: ``case 0 (name)``."""
        return f"case {self.index} ({self.name})"


@dataclass(frozen=True)
class CaseResult:
    """A case's estimate against its measurement."""

    case: Case
    estimate_us: float
    dominant: list[tuple[str, float]]
    """The constants the estimate's critical path is charged to, with their share (0..1),
    largest first."""
    counters: dict[str, tuple[float, float]]
    """Each measured profiler counter with the estimate's value of it: ``(measured, estimated)``."""

    @property
    def ratio(self) -> float:
        """Estimate over measurement."""
        return self.estimate_us / self.case.measured_us

    @property
    def error_percent(self) -> float:
        """How far the estimate is off, percent (positive: the model is slower)."""
        return 100.0 * (self.ratio - 1.0)


@dataclass(frozen=True)
class Report:
    """Every case's result and the overall geometric-mean ratio."""

    results: list[CaseResult]

    @property
    def geomean_ratio(self) -> float:
        """The geometric mean of the estimate / measurement ratios (1.0: unbiased)."""
        if not self.results:
            return float("nan")
        return math.exp(sum(math.log(r.ratio) for r in self.results) / len(self.results))

    def table(self) -> str:
        """The report as Markdown."""
        lines = [
            "| case | target | measured µs | estimate µs | ratio | error | dominant constants |",
            "|---|---|---|---|---|---|---|",
        ]
        for r in self.results:
            dominant = ", ".join(f"{name} {share:.0%}" for name, share in r.dominant[:3])
            lines.append(
                f"| {r.case.name} | {r.case.target} | {r.case.measured_us:.1f} | {r.estimate_us:.1f} "
                f"| {r.ratio:.2f} | {r.error_percent:+.0f}% | {dominant} |"
            )
        lines.append("")
        count = len(self.results)
        cases = "case" if count == 1 else "cases"
        lines.append(
            f"geometric-mean ratio (estimate / measured) over {count} {cases}: {self.geomean_ratio:.3f}"
        )
        for r in self.results:
            for name, (measured, estimated) in r.counters.items():
                lines.append(f"  {r.case.name}: {name} measured {measured:.6g}, estimated {estimated:.6g}")
        return "\n".join(lines) + "\n"

    def to_json(self) -> str:
        """The report as JSON."""
        return json.dumps(
            {
                "geomean_ratio": self.geomean_ratio,
                "cases": [
                    {
                        "name": r.case.name,
                        "kernel": r.case.kernel,
                        "target": r.case.target,
                        "measured_us": r.case.measured_us,
                        "estimate_us": r.estimate_us,
                        "ratio": r.ratio,
                        "error_percent": r.error_percent,
                        "dominant": [[n, s] for n, s in r.dominant],
                        "counters": {k: list(v) for k, v in r.counters.items()},
                    }
                    for r in self.results
                ],
            },
            indent=2,
        )


def _field(doc: dict[str, Any], key: str, kind: type | tuple[type, ...], where: str) -> Any:
    if key not in doc:
        raise CalibrationError(f"{where}: missing `{key}`")
    value = doc[key]
    if isinstance(value, bool) or not isinstance(value, kind):
        raise CalibrationError(f"{where}: `{key}` has the wrong type ({type(value).__name__})")
    return value


def _case(doc: Any, index: int, base: Path) -> Case:
    where = f"case {index}"
    if not isinstance(doc, dict):
        raise CalibrationError(f"{where}: must be an object, got {type(doc).__name__}")
    kernel = _field(doc, "kernel", str, where)
    name = doc.get("name", kernel)
    where = f"case {index} ({name})"
    source = base / _field(doc, "source", str, where)
    if not source.is_file():
        raise CalibrationError(f"{where}: `source` {source} is not a file")
    inputs = []
    for i, spec in enumerate(_field(doc, "inputs", list, where)):
        at = f"{where}: inputs[{i}]"
        if not isinstance(spec, dict):
            raise CalibrationError(f"{at} must be an object with `shape` and `dtype`")
        shape = _field(spec, "shape", list, at)
        if not all(isinstance(d, int) and not isinstance(d, bool) and d > 0 for d in shape):
            raise CalibrationError(f"{at}: `shape` must be positive ints, got {shape}")
        inputs.append((tuple(shape), _field(spec, "dtype", str, at)))
    target = _field(doc, "target", str, where)
    if target not in _TARGETS:
        raise CalibrationError(f"{where}: `target` must be one of {', '.join(_TARGETS)}, got {target!r}")
    measured = float(_field(doc, "measured_us", (int, float), where))
    if not measured > 0:
        raise CalibrationError(f"{where}: `measured_us` must be positive, got {measured}")
    kwargs = doc.get("kwargs", {})
    counters = doc.get("counters", {})
    if not isinstance(kwargs, dict) or not isinstance(counters, dict):
        raise CalibrationError(f"{where}: `kwargs` and `counters` must be objects")
    if not all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in counters.values()):
        raise CalibrationError(f"{where}: `counters` values must be numbers")
    return Case(
        name=str(name),
        source=source,
        kernel=kernel,
        inputs=tuple(inputs),
        target=target,
        measured_us=measured,
        kwargs=dict(kwargs),
        counters={str(k): float(v) for k, v in counters.items()},
        index=index,
    )


def load_cases(path: str | Path) -> list[Case]:
    """The cases of a calibration file (see the module doc); a :class:`CalibrationError` names
    the case and field that cannot be used."""
    file = Path(path)
    try:
        doc = json.loads(file.read_text(encoding="utf-8"))
    except OSError as e:
        raise CalibrationError(f"{file}: cannot read: {e.strerror or e}") from e
    except json.JSONDecodeError as e:
        raise CalibrationError(f"{file}: not JSON: {e}") from e
    if not isinstance(doc, dict) or not isinstance(doc.get("cases"), list):
        raise CalibrationError(f"{file}: must be an object with a `cases` list")
    return [_case(c, i, file.parent) for i, c in enumerate(doc["cases"])]


def _array(shape: tuple[int, ...], dtype: str, where: str) -> Any:
    import torch

    kind = getattr(torch, dtype, None)
    if not isinstance(kind, torch.dtype):
        raise CalibrationError(f"{where}: unknown dtype {dtype!r} (a torch dtype name, e.g. bfloat16)")
    return torch.zeros(shape, dtype=kind)


def estimate(case: Case) -> CaseResult:
    """Traces and estimates one case."""
    from torch_nki import nki
    from torch_nki.nki.perf import profile_summary

    module = nki.load_source(case.source.read_text(encoding="utf-8"), case.source.stem)
    kernel = getattr(module, case.kernel, None)
    if kernel is None:
        raise CalibrationError(f"{case.where}: no kernel `{case.kernel}` in {case.source}")
    arrays = [
        _array(shape, dtype, f"{case.where}: inputs[{i}]") for i, (shape, dtype) in enumerate(case.inputs)
    ]
    if not isinstance(kernel, (nki.Kernel, nki.Launch)):
        kernel = nki.Kernel(kernel)
    program = kernel.trace(*arrays, target=case.target, **case.kwargs)
    _, summary, trace = program.cost()
    doc = json.loads(summary)
    total_ns = float(doc["total_ns"])
    by = [(str(n), float(ns)) for n, ns in doc.get("critical_path_by_constant", [])]
    charged = sum(ns for _, ns in by) or 1.0
    profile = profile_summary(summary, trace).to_dict()
    counters = {
        name: (measured, float(profile[name]))
        for name, measured in case.counters.items()
        if isinstance(profile.get(name), (int, float))
    }
    return CaseResult(
        case=case,
        estimate_us=total_ns / 1e3,
        dominant=[(n, ns / charged) for n, ns in by],
        counters=counters,
    )


def calibrate(path: str | Path) -> Report:
    """Every case of the file estimated against its measurement."""
    return Report([estimate(c) for c in load_cases(path)])


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The ``calibrate`` subcommand's arguments."""
    parser.add_argument("file", help="a JSON file of measured cases (see docs/cost-model.md)")
    parser.add_argument("--json", metavar="FILE", help="also write the report as JSON here")


def run(args: argparse.Namespace) -> int:
    """``torch-nki calibrate``: prints the report; 2 when the file or a case cannot be used."""
    try:
        report = calibrate(args.file)
    except CalibrationError as e:
        print(f"torch-nki calibrate: {e}")
        return 2
    print(report.table(), end="")
    if args.json:
        try:
            Path(args.json).write_text(report.to_json(), encoding="utf-8")
        except OSError as e:
            print(f"torch-nki calibrate: cannot write {args.json}: {e.strerror or e}")
            return 2
    return 0

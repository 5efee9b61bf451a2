"""``torch_nki.profile``: run a model under ``torch.profiler``, rank its hotspots per module
instance and per ATen op by their estimated Trn2 device time (next to their CPU self time), and
say which kernel could take each one.

Device time per row: the cost model's estimate of the matching kernel where a kernel takes the
row, else the roofline estimate of its ATen ops (:mod:`torch_nki.roofline`: FLOPs and bytes at
the target's peak rates), marked as such. Where torch reports device time for a ``neuron``
device (the profiler's ``PrivateUse1`` events on a TorchNeuron host), that measured time is used
instead. An ATen op called inside another one that has an estimate (``aten::addmm`` inside
``aten::linear``) is counted in its caller's row, not twice.

A module instance matches when an adapter (:mod:`torch_nki.adapters`) recognises its structure
and one of its kernels' ``replaces`` patterns names its class; the adapter is then run on the
inputs captured during profiling, which evaluates every kernel contract on the real shapes and
dtypes (a rejected shape is listed as ``no kernel: <contract message>``) and gives the cost
model's Trn2 estimate of the neuron ops it would call. ATen ops match kernels whose ``replaces``
names them, checked the same way on the recorded input shapes.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode

from torch_nki import _device_time, _quiet, testing
from torch_nki.adapters import adapters_for, qualified_name
from torch_nki.errors import NkiError

__all__ = ["Captured", "Hotspot", "HotspotReport", "hotspot_rows", "profile", "record_neuron_calls"]

_MODULE_PREFIX = "nki.module::"


@dataclass
class Captured:
    """The first call of a module instance: its arguments, detached and cloned."""

    args: tuple[Any, ...]
    kwargs: dict[str, Any]


@dataclass
class Hotspot:
    """One row of the report: a module instance or an ATen op (with its input shapes)."""

    kind: str
    """``module`` or ``aten``."""
    name: str
    """The module's qualified name in the model (``model.layers.0.mlp``) or the op (``aten::mm``)."""
    target: str
    """The module's class, or the op's input shapes."""
    calls: int
    self_ms: float
    """Self time over all profiled steps, milliseconds (children excluded)."""
    share: float
    """Of the total self time of rows of this kind."""
    kernel: str | None = None
    """The matching kernel (``rmsnorm``) or adapter (``MLP: silu_mul, linear``), if any."""
    reason: str = ""
    """Why nothing matches, or the pattern that did (``*RMSNorm``)."""
    device_us: float | None = None
    """The cost model's Trn2 estimate for one call of the matching neuron ops, µs."""
    device_total_us: float | None = None
    """Device time over all profiled calls, µs: measured on a ``neuron`` device, else the cost
    model's estimate of the matching kernel, else the roofline estimate of the row's ATen ops
    (``None``: no estimate)."""
    device_source: str = ""
    """Where ``device_total_us`` comes from: ``measured``, ``cost model``, ``roofline``, ``in
    <op>`` for an ATen op counted in the op that called it; a module without a kernel sums its
    ATen ops' (``cost model + roofline`` when some of them have a kernel)."""
    device_share: float = 0.0
    """Of the total device time of rows of this kind."""


@dataclass
class HotspotReport:
    """Ranked hotspots of one profiled model (see :func:`profile`)."""

    model: str
    steps: int
    modules: list[Hotspot]
    ops: list[Hotspot]
    captured: dict[str, Captured] = field(default_factory=dict, repr=False)
    """Inputs of each module instance's first call, for :func:`torch_nki.swap`'s verification."""

    @property
    def matched(self) -> list[Hotspot]:
        """Module rows with a matching kernel."""
        return [h for h in self.modules if h.kernel is not None]

    def to_markdown(self, top: int = 20) -> str:
        """The report as Markdown tables (modules, then ATen ops), ``top`` rows each, ranked by
        device time: ``trn2 µs`` over all profiled calls and its share, where it comes from
        (``measured``, ``cost model``, ``roofline``, ``in <op>``), then CPU self time and share."""
        lines = [f"# Hotspots of `{self.model}` ({self.steps} steps)", ""]
        for title, rows in (("Module instances", self.modules), ("ATen ops", self.ops)):
            lines += [
                f"## {title}",
                "",
                "| # | name | what | calls | trn2 µs | trn2 share | from | cpu self ms | cpu share "
                "| kernel |",
                "|---|---|---|---|---|---|---|---|---|---|",
            ]
            for i, h in enumerate(rows[:top], 1):
                kernel = f"`{h.kernel}` ({h.reason})" if h.kernel else f"no kernel: {h.reason}"
                kernel = kernel.replace("|", "\\|")
                device = f"{h.device_total_us:.1f}" if h.device_total_us is not None else "—"
                lines.append(
                    f"| {i} | `{h.name}` | {h.target} | {h.calls} | {device} | {h.device_share:.0%} "
                    f"| {h.device_source or '—'} | {h.self_ms:.3f} | {h.share:.0%} | {kernel} |"
                )
            lines.append("")
        return "\n".join(lines)

    def to_json(self) -> str:
        """The report as JSON (captured inputs left out)."""
        doc = {
            "model": self.model,
            "steps": self.steps,
            "modules": [asdict(h) for h in self.modules],
            "ops": [asdict(h) for h in self.ops],
        }
        return json.dumps(doc, indent=2)

    def __str__(self) -> str:
        return self.to_markdown()


class _NeuronCalls(TorchDispatchMode):
    """Records every op of the ``neuron`` namespace, or of a namespace a kernel crate was loaded
    into, dispatched while active, with its arguments (``name``, or ``ns::name`` outside
    ``neuron``)."""

    def __init__(self) -> None:
        from torch_nki._register import registrations

        # torch's TorchDispatchMode.__init__ is unannotated (untyped_calls_exclude does not
        # reach a super() call).
        super().__init__()  # type: ignore[no-untyped-call]
        self.calls: list[tuple[str, tuple[Any, ...]]] = []
        self.namespaces = {"neuron"} | {reg.namespace for reg in registrations()}

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        if func.namespace in self.namespaces and not func._opname.startswith("_"):
            # `<op>_fwd` computes a kernel with saved outputs (`<op>` returns its public part).
            name = func._opname.removesuffix("_fwd")
            self.calls.append(
                (name if func.namespace == "neuron" else f"{func.namespace}::{name}", tuple(args))
            )
        return func(*args, **(kwargs or {}))


@contextmanager
def record_neuron_calls() -> Iterator[list[tuple[str, tuple[Any, ...]]]]:
    """Collects ``(op, args)`` of every call of a torch-nki op (``torch.ops.neuron``, or a loaded
    crate's namespace) made inside the block."""
    mode = _NeuronCalls()
    with mode:
        yield mode.calls


def _detach(value: Any) -> Any:
    if isinstance(value, torch.Tensor):
        return value.detach().clone()
    if isinstance(value, tuple | list):
        return type(value)(_detach(v) for v in value)
    if value is None or isinstance(value, bool | int | float | str):
        return value
    return None  # caches and other stateful objects are not replayed


def _progress(step: int, steps: int) -> None:
    width = 20
    done = width * step // max(steps, 1)
    sys.stderr.write(f"\r[torch-nki] profiling [{'#' * done}{'.' * (width - done)}] {step}/{steps}")
    if step == steps:
        sys.stderr.write("\n")
    sys.stderr.flush()


def _estimate(calls: list[tuple[str, tuple[Any, ...]]]) -> float:
    import torch_nki

    total = 0.0
    for op, args in calls:
        meta = tuple(a.to("meta") if isinstance(a, torch.Tensor) else a for a in args)
        total += torch_nki.cost(op, *meta, target="trn2").total_ns / 1e3
    return total


def _agrees(
    module: torch.nn.Module, got: Any, calls: list[tuple[str, tuple[Any, ...]]], call: Captured
) -> bool:
    """Whether an adapter's output ``got`` is the original forward's on the same call, within
    the tolerance classes of the kernels it called (as :func:`torch_nki.swap` verifies)."""
    from torch_nki.swapping import _first_tensor, _tolerance

    try:
        want = _first_tensor(module(*call.args, **call.kwargs))
    except Exception:  # the original cannot run this call again: no evidence either way
        return False
    g = _first_tensor(got)
    if g is None or want is None or g.shape != want.shape:
        return False
    rtol, atol = _tolerance(calls)
    return torch.allclose(g.float(), want.float(), rtol=rtol, atol=atol, equal_nan=True)


def _match_module(module: torch.nn.Module, captured: Captured | None) -> tuple[str | None, str, float | None]:
    """The kind that takes the module (label, pattern, Trn2 estimate of its call), or why none
    does. When several kinds recognise it (an RMSNorm and an offset RMSNorm look alike), the
    first whose output on the captured call is the module's own, else the first that takes the
    call (the swap then verifies and reverts it with the reason)."""
    found = adapters_for(module)
    if not found:
        return None, "no adapter recognises this module", None
    outcome: tuple[str | None, str, float | None] = (None, "", None)
    viable: tuple[str | None, str, float | None] | None = None
    for adapter, pattern in found:
        label = f"{adapter.kind}: {', '.join(adapter.kernels)}"
        if captured is None:
            return label, f"{pattern}; not called while profiling", None
        try:
            with torch.no_grad(), record_neuron_calls() as calls:
                result = adapter.forward(module, *captured.args, **captured.kwargs)
            if result is NotImplemented:
                outcome = (None, f"{pattern} matches, but this call is outside what the adapter takes", None)
                continue
            match = (label, pattern, _estimate(calls))
            if len(found) == 1:
                return match
            with torch.no_grad():
                if _agrees(module, result, calls, captured):
                    return match
            viable = viable or match
        except NkiError as err:
            # The contract refuses these shapes, or the kernel or its cost estimate fails on them:
            # the module stays as it is, with the reason.
            outcome = (None, str(err), None)
    return viable or outcome


def _replacing() -> dict[str, list[str]]:
    """ATen op name → the kernels whose ``replaces`` names it."""
    out: dict[str, list[str]] = {}
    for kernel in testing.ops_with_reference():
        for pattern in testing.op_spec(kernel).replaces:
            out.setdefault(pattern, []).append(kernel)
    return out


def _match_op(
    op: str, shapes: list[list[int]], replacing: dict[str, list[str]]
) -> tuple[str | None, str, float | None]:
    import torch_nki

    kernels = replacing.get(op, [])
    if not kernels:
        return None, "no kernel replaces this op", None
    reasons = []
    for kernel in kernels:
        spec = testing.op_spec(kernel)
        tensors = [p for p in spec.params if p.is_tensor]
        given = [torch.empty(s, device="meta") for s in shapes if s][: len(tensors)]
        try:
            report = torch_nki.cost(kernel, *given, target="trn2")
        except (NkiError, TypeError, ValueError) as err:
            reasons.append(str(err))
            continue
        return kernel, f"replaces {op}", report.total_ns / 1e3
    return None, "; ".join(reasons), None


def profile(
    model: torch.nn.Module, *example_inputs: Any, steps: int = 3, **example_kwargs: Any
) -> HotspotReport:
    """Runs ``model(*example_inputs, **example_kwargs)`` ``steps`` times under ``torch.profiler``
    (input shapes recorded, each module instance in its own profiler range, no autograd) and
    returns the ranked hotspots: self time per module instance and per ATen op, the matching
    kernel with its contract checked on the real shapes, and the cost model's Trn2 estimate.

    The inputs of each module instance's first call (the warm-up call) are captured for
    :func:`torch_nki.swap`'s verification. A progress bar goes to stderr; what the profiler's
    C++ side prints when it starts and stops is captured (shown with ``TORCH_NKI_VERBOSE=1``).
    ``steps`` must be at least 1 (``ValueError`` otherwise).
    """
    if steps < 1:
        raise ValueError(f"torch_nki.profile: steps must be at least 1, got {steps}")
    names = {m: n or type(model).__name__ for n, m in model.named_modules()}
    captured: dict[str, Captured] = {}
    ranges: dict[int, list[Any]] = {}
    profiling = False

    def before(module: torch.nn.Module, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        name = names[module]
        if not profiling:
            # Captured in the warm-up call: the clones are not profiled as the model's ops.
            if name not in captured:
                captured[name] = Captured(_detach(args), {k: _detach(v) for k, v in kwargs.items()})
            return
        r = torch.profiler.record_function(_MODULE_PREFIX + name)
        r.__enter__()
        ranges.setdefault(id(module), []).append(r)

    def after(module: torch.nn.Module, args: tuple[Any, ...], kwargs: dict[str, Any], out: Any) -> None:
        if not profiling:
            return
        stack = ranges.get(id(module))
        if stack:
            stack.pop().__exit__(None, None, None)

    handles = []
    for module in names:
        handles.append(module.register_forward_pre_hook(before, with_kwargs=True))
        handles.append(module.register_forward_hook(after, with_kwargs=True))
    try:
        with torch.no_grad():
            model(*example_inputs, **example_kwargs)  # warm-up (first-call costs), not profiled
        profiling = True
        activities = [torch.profiler.ProfilerActivity.CPU]
        if torch._C._get_privateuse1_backend_name() == _device_time.NEURON:
            # A TorchNeuron host: the device's own times, used instead of the estimates.
            activities.append(torch.profiler.ProfilerActivity.PrivateUse1)
        prof = torch.profiler.profile(activities=activities, record_shapes=True)
        # Kineto logs to the process's descriptors when it starts and stops (`USDT: ...
        # profiler_start`, `ERROR: ... gpuGetDeviceCount failed` without a GPU): captured, so only
        # the progress bar shows (`TORCH_NKI_VERBOSE=1` shows the rest).
        with _quiet.captured("torch.profiler"):
            prof.start()
        try:
            with torch.no_grad():
                for step in range(steps):
                    model(*example_inputs, **example_kwargs)
                    _progress(step + 1, steps)
        finally:
            with _quiet.captured("torch.profiler"):
                prof.stop()
    finally:
        for h in handles:
            h.remove()
    by_name = {n: m for m, n in names.items()}
    modules, ops = hotspot_rows(list(prof.events()), by_name, captured)
    return HotspotReport(model=type(model).__name__, steps=steps, modules=modules, ops=ops, captured=captured)


class _Matcher:
    """Matches ATen op rows to kernels, once per op and input shapes."""

    def __init__(self) -> None:
        self.replacing = _replacing()
        self.found: dict[tuple[str, str], tuple[str | None, str, float | None]] = {}

    def match(self, event: Any) -> tuple[str | None, str, float | None]:
        key = (str(event.name), str(event.input_shapes))
        found = self.found.get(key)
        if found is None:
            shapes = [list(s) for s in event.input_shapes if isinstance(s, list | tuple)]
            found = self.found[key] = _match_op(event.name, shapes, self.replacing)
        return found

    def kernel_us(self, event: Any) -> float | None:
        return self.match(event)[2]


def _rank(rows: list[Hotspot]) -> list[Hotspot]:
    """Rows by device time (those without an estimate last), then CPU self time; shares set."""
    whole = sum(h.device_total_us or 0.0 for h in rows) or 1.0
    for h in rows:
        h.device_share = (h.device_total_us or 0.0) / whole
    rows.sort(key=lambda h: (h.device_total_us is not None, h.device_total_us or 0.0, h.self_ms))
    rows.reverse()
    return rows


def hotspot_rows(
    events: list[Any],
    modules: dict[str, torch.nn.Module] | None = None,
    captured: dict[str, Captured] | None = None,
    target: str = "trn2",
) -> tuple[list[Hotspot], list[Hotspot]]:
    """The module and ATen op rows of a profile's events (``prof.events()``; module instances
    are ``record_function`` ranges named ``nki.module::<name>``, ``modules`` maps their names
    to the instances), each ranked by device time (see the module documentation)."""
    matcher = _Matcher()
    times = _device_time.DeviceTimes(events, matcher.kernel_us, target)
    return (
        _module_rows(events, modules or {}, captured or {}, times),
        _op_rows(events, matcher, times),
    )


def _module_rows(
    events: list[Any], modules: dict[str, torch.nn.Module], captured: dict[str, Captured], times: Any
) -> list[Hotspot]:
    totals: dict[str, float] = {}
    calls: dict[str, int] = {}
    device: dict[str, float | None] = {}
    sources: dict[str, set[str]] = {}

    def own(evt: Any) -> Iterator[Any]:
        """The nearest module ranges and the ATen ops outside them, below ``evt``."""
        for child in evt.cpu_children:
            if child.name.startswith(_MODULE_PREFIX):
                yield child
            else:
                if _device_time.is_aten(child):
                    yield child
                yield from own(child)

    for evt in events:
        if not evt.name.startswith(_MODULE_PREFIX):
            continue
        name = evt.name[len(_MODULE_PREFIX) :]
        below = list(own(evt))
        inner = sum(c.cpu_time_total for c in below if c.name.startswith(_MODULE_PREFIX))
        totals[name] = totals.get(name, 0.0) + max(evt.cpu_time_total - inner, 0.0)
        calls[name] = calls.get(name, 0) + 1
        for op in below:
            if op.name.startswith(_MODULE_PREFIX):
                continue
            us, source = times.of(op)
            if us is not None:
                device[name] = (device.get(name) or 0.0) + us
                if not source.startswith("in "):
                    sources.setdefault(name, set()).add(source)
    whole = sum(totals.values()) or 1.0
    rows = []
    for name, self_us in totals.items():
        module = modules.get(name)
        if module is None:  # a range of events recorded elsewhere
            kernel, reason, device_us = None, "not a module of the profiled model", None
        else:
            kernel, reason, device_us = _match_module(module, captured.get(name))
        # Its ops' times, each from where it came (cost model where a kernel takes the op).
        total, source = device.get(name), " + ".join(sorted(sources.get(name, ())))
        if kernel is not None and device_us is not None and not times.measured:
            total, source = device_us * calls[name], "cost model"
        rows.append(
            Hotspot(
                "module",
                name,
                qualified_name(module) if module is not None else "",
                calls[name],
                self_us / 1e3,
                self_us / whole,
                kernel,
                reason,
                device_us,
                total,
                source,
            )
        )
    return _rank(rows)


def _op_rows(events: list[Any], matcher: _Matcher, times: Any) -> list[Hotspot]:
    groups: dict[tuple[str, str], list[Any]] = {}
    for evt in events:
        if _device_time.is_aten(evt):
            groups.setdefault((str(evt.name), str(evt.input_shapes)), []).append(evt)
    whole = sum(e.self_cpu_time_total for g in groups.values() for e in g) or 1.0
    rows = []
    for (name, _), group in groups.items():
        first = group[0]
        shapes = [list(s) for s in first.input_shapes if isinstance(s, list | tuple)]
        kernel, reason, device_us = matcher.match(first)
        self_us = sum(e.self_cpu_time_total for e in group)
        per_call = [times.of(e) for e in group]
        known = [us for us, _ in per_call if us is not None]
        total = sum(known) if known else None
        source = next((src for us, src in per_call if us is not None), "")
        rows.append(
            Hotspot(
                "aten",
                name,
                str(shapes),
                len(group),
                self_us / 1e3,
                self_us / whole,
                kernel,
                reason,
                device_us,
                total,
                source,
            )
        )
    return _rank(rows)

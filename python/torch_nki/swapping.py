"""``torch_nki.swap`` / ``unswap`` / ``swapped``: rebind the forward of matching module
**instances** (never their classes) to neuron ops, verify each against the original on the
inputs captured by :func:`torch_nki.profile` (or, without them, on inputs generated from the
instance's parameters), and revert the ones that fail, whatever the failure.

A swapped instance carries its original forward in its ``__dict__``; unswapping deletes the
instance attribute, so the class's forward (or the instance's earlier override) is back exactly.
Swaps survive ``model.to(dtype)``, ``state_dict()`` round trips and ``copy.deepcopy`` (adapters
read parameters at call time, and a deep copy rebinds the forward to the copy). Swapping twice is
a no-op for instances already swapped.
"""

from __future__ import annotations

import json
import types
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from typing import Any

import torch

from torch_nki import testing
from torch_nki._kernels import Binder
from torch_nki.adapters import Adapter, adapters_for, is_k_major, qualified_name
from torch_nki.errors import NkiError
from torch_nki.hotspots import Captured, HotspotReport, record_neuron_calls

__all__ = ["SwapReport", "Swapped", "swap", "swapped", "unswap"]

_STATE = "_torch_nki_swap"


@dataclass
class _State:
    kind: str
    original: Any
    """The instance's own ``forward`` attribute before the swap (``None``: the class's)."""
    relaid: tuple[torch.nn.Parameter, ...] = ()
    """The parameters the swap stored K-major (:func:`_relayout`), given their layout back when
    the swap is undone."""


@dataclass
class Swapped:
    """What happened to one module instance."""

    name: str
    module: str
    kind: str
    kernels: tuple[str, ...]
    status: str
    """``swapped`` (verified on captured or generated inputs), ``swapped, not verified``
    (``verify=False``), ``reverted`` or ``already swapped``."""
    reason: str = ""
    max_abs_error: float | None = None


@dataclass
class SwapReport:
    """The outcome of :func:`swap`."""

    model: str
    entries: list[Swapped] = field(default_factory=list)

    @property
    def swapped(self) -> list[Swapped]:
        """Instances whose forward now runs neuron ops."""
        return [e for e in self.entries if e.status.startswith("swapped") or e.status == "already swapped"]

    @property
    def reverted(self) -> list[Swapped]:
        """Instances whose verification failed (their original forward is back)."""
        return [e for e in self.entries if e.status == "reverted"]

    def to_markdown(self) -> str:
        """The report as a Markdown table."""
        lines = [
            f"# Swap report for `{self.model}`",
            "",
            f"{len(self.swapped)} swapped, {len(self.reverted)} reverted.",
            "",
            "| module | class | adapter | status | max abs error | note |",
            "|---|---|---|---|---|---|",
        ]
        for e in self.entries:
            err = f"{e.max_abs_error:.2e}" if e.max_abs_error is not None else "—"
            adapter = f"{e.kind} ({', '.join(e.kernels)})"
            lines.append(f"| `{e.name}` | {e.module} | {adapter} | {e.status} | {err} | {e.reason} |")
        return "\n".join(lines) + "\n"

    def to_json(self) -> str:
        """The report as JSON."""
        return json.dumps({"model": self.model, "entries": [asdict(e) for e in self.entries]}, indent=2)

    def __str__(self) -> str:
        return self.to_markdown()


def _relayout(module: torch.nn.Module, adapter: Adapter, shared: set[int]) -> tuple[torch.nn.Parameter, ...]:
    """Stores the parameters ``adapter`` reads K-major (:attr:`Adapter.k_major`) so: each
    ``p[N, K]`` keeps its shape, values, dtype and identity (``p.data`` is replaced, so an
    optimizer holding it is unaffected) and becomes the transpose of a contiguous ``[K, N]``,
    as ``model.to(memory_format=torch.channels_last)`` changes a convolution's strides. Left as
    they are: a parameter another module uses too (``shared``, e.g. an output projection tied to
    the embedding, which reads rows), one that is not a plain contiguous 2-D CPU tensor."""
    if adapter.k_major is None:
        return ()
    relaid = []
    for name in adapter.k_major(module):
        p = getattr(module, name, None)
        if (
            not isinstance(p, torch.nn.Parameter)
            or id(p) in shared
            or type(p.data) is not torch.Tensor
            or p.dim() != 2
            or p.layout != torch.strided
            or p.device.type != "cpu"
            or not p.is_contiguous()
            or min(p.shape) < 2
        ):
            continue
        p.data = p.data.t().contiguous().t()
        relaid.append(p)
    return tuple(relaid)


def _restore_layout(params: tuple[torch.nn.Parameter, ...]) -> None:
    """Gives parameters :func:`_relayout` stored K-major PyTorch's contiguous layout back (those
    still K-major: a layout the user changed since is theirs)."""
    for p in params:
        if is_k_major(p):
            p.data = p.data.contiguous()


def _shared_parameters(model: torch.nn.Module) -> set[int]:
    """The ids of parameters registered in more than one place in ``model`` (tied weights)."""
    seen: set[int] = set()
    shared: set[int] = set()
    for _, p in model.named_parameters(remove_duplicate=False):
        (shared if id(p) in seen else seen).add(id(p))
    return shared


def _install(module: torch.nn.Module, adapter: Adapter, relaid: tuple[torch.nn.Parameter, ...] = ()) -> None:
    original = module.__dict__.get("forward")

    def forward(self: torch.nn.Module, *args: Any, **kwargs: Any) -> Any:
        result = adapter.forward(self, *args, **kwargs)
        if result is NotImplemented:
            return _original_forward(self)(*args, **kwargs)
        return result

    module.forward = types.MethodType(forward, module)
    setattr(module, _STATE, _State(adapter.kind, original, relaid))


def _original_forward(module: torch.nn.Module) -> Any:
    state: _State = getattr(module, _STATE)
    if state.original is not None:
        return state.original
    return types.MethodType(type(module).forward, module)


def _remove(module: torch.nn.Module) -> None:
    state: _State | None = module.__dict__.pop(_STATE, None)
    if state is None:
        return
    _restore_layout(state.relaid)
    if state.original is None:
        module.__dict__.pop("forward", None)
    else:
        module.forward = state.original


def _first_tensor(out: Any) -> torch.Tensor | None:
    if isinstance(out, torch.Tensor):
        return out
    if isinstance(out, tuple | list) and out and isinstance(out[0], torch.Tensor):
        return out[0]
    return None


def _tolerance(calls: list[tuple[str, tuple[Any, ...]]]) -> tuple[float, float]:
    """The loosest ``(rtol, atol)`` of the tolerance classes of the neuron calls an adapter made,
    each evaluated on the call's own shapes and dtypes (a composite forward is held to its
    loosest kernel)."""
    rtol = atol = 0.0
    for op, args in calls:
        dtype = next((a.dtype for a in args if isinstance(a, torch.Tensor) and a.is_floating_point()), None)
        if dtype is None:
            continue
        bound = Binder(testing.op_spec(op))(args, {})  # the dispatcher drops trailing defaults
        for r, a in testing.tolerances(testing.SampleInput(op, dtype, bound, -1)):
            rtol, atol = max(rtol, r), max(atol, a)
    return rtol, atol


def _verify(module: torch.nn.Module, adapter: Adapter, captured: Captured) -> tuple[bool, str, float | None]:
    """Runs the adapter and the original forward on the captured inputs; (ok, reason, error)."""
    with torch.no_grad():
        try:
            with record_neuron_calls() as calls:
                got = adapter.forward(module, *captured.args, **captured.kwargs)
        except NkiError as err:
            return False, f"the kernel rejected the call: {err}", None
        if got is NotImplemented:
            return True, "the call is outside the adapter; it runs the original forward", None
        want = _original_forward(module)(*captured.args, **captured.kwargs)
    g, w = _first_tensor(got), _first_tensor(want)
    if g is None or w is None or g.shape != w.shape or g.dtype != w.dtype:
        return False, "the output's structure, shape or dtype differs from the original's", None
    rtol, atol = _tolerance(calls)
    error = float((g.float() - w.float()).abs().max()) if g.numel() else 0.0
    if not torch.allclose(g.float(), w.float(), rtol=rtol, atol=atol, equal_nan=True):
        return False, f"outputs differ beyond rtol={rtol}, atol={atol} (max abs error {error:.3g})", error
    return True, "", error


def _generated(module: torch.nn.Module, adapter: Adapter, seed: int) -> Captured:
    """A call generated from the module's parameters (see :attr:`Adapter.example`)."""
    args, kwargs = adapter.example(module, torch.Generator().manual_seed(seed))
    return Captured(args, kwargs)


def _check(
    module: torch.nn.Module, adapter: Adapter, captured: Captured | None, seed: int
) -> tuple[bool, str, float | None]:
    """Verifies a swapped instance on its captured call, else on a generated one. Whatever the
    verification raises (the original forward failing, a model on the ``meta`` device) fails it
    with the exception as the reason."""
    try:
        if captured is not None:
            return _verify(module, adapter, captured)
        ok, reason, error = _verify(module, adapter, _generated(module, adapter, seed))
    except Exception as err:
        return False, f"verifying it raised {type(err).__name__}: {err}", None
    note = "verified on generated inputs (no captured call: profile the model to verify on real ones)"
    return ok, (reason if not ok else f"{reason}; {note}" if reason else note), error


def _reasons(failed: list[tuple[str, str]]) -> str:
    """Why no kind verified: the reason, or each kind's when they differ."""
    if len({reason for _, reason in failed}) == 1:
        return failed[0][1]
    return "; ".join(f"{kind}: {reason}" for kind, reason in failed)


def swap(
    model: torch.nn.Module,
    report_or_plan: HotspotReport | None = None,
    verify: bool = True,
    relayout: bool = False,
) -> SwapReport:
    """Swaps every module instance of ``model`` that a registered kind (an
    :class:`~torch_nki.adapters.Adapter`) recognises and whose first kernel's ``replaces`` patterns
    name its class (or, given a :class:`HotspotReport`, the matched
    instances of that report), verifying each against its original forward: on the inputs the
    report captured, or (no report, or never called while profiling) on inputs generated from
    its parameters' shapes and dtype. A failed verification — a mismatch, a kernel's rejection,
    or any exception — reverts that instance and records why. Per instance all or nothing: an
    exception that escapes (``KeyboardInterrupt``) restores every instance this call swapped
    before it propagates. When several kinds recognise an instance, the first that verifies is
    kept (the others' failures are noted). ``verify=False`` swaps the first kind without checking
    (``swapped, not verified``).

    ``relayout=True`` stores the parameters a kind reads fastest K-major
    (:attr:`~torch_nki.adapters.Adapter.k_major`: a bias-free ``nn.Linear``'s weight) so, before
    the instance is verified, as the tensor engine reads them: no transposes of the weight on
    every call (llama-512's fp32 forward 6 to 9% faster, docs/swapping.md). Shape, values,
    dtype and the ``Parameter`` object stay; the strides become those of a transpose. Code that
    needs contiguous parameters refuses them (FSDP2's ``fully_shard``, safetensors'
    ``save_file`` and so ``save_pretrained``, ``.view`` on the weight), hence off by default.
    Tied parameters are left as they are. Unswapping (or a revert) gives them their contiguous
    layout back.
    Returns the :class:`SwapReport`; a model with nothing to swap gives an empty report."""
    report = SwapReport(type(model).__name__)
    wanted = {h.name for h in report_or_plan.matched} if report_or_plan is not None else None
    captured = report_or_plan.captured if report_or_plan is not None else {}
    root = type(model).__name__
    shared = _shared_parameters(model) if relayout else set()
    plan = []
    for name, module in model.named_modules():
        name = name or root
        found = [adapter for adapter, _ in adapters_for(module)]
        if not found or (wanted is not None and name not in wanted):
            continue
        plan.append((name, module, found))
    # Kinds that call other (possibly swapped) modules are swapped after their children.
    plan.sort(key=lambda item: item[2][0].composite)
    installed: list[torch.nn.Module] = []
    try:
        for seed, (name, module, candidates) in enumerate(plan):
            entry = Swapped(
                name, qualified_name(module), candidates[0].kind, candidates[0].kernels, "swapped"
            )
            report.entries.append(entry)
            if _STATE in module.__dict__:
                entry.kind = getattr(module, _STATE).kind
                entry.status = "already swapped"
                continue
            if not verify:
                _install(module, candidates[0], _relayout(module, candidates[0], shared) if relayout else ())
                installed.append(module)
                entry.status, entry.reason = "swapped, not verified", "verification off"
                continue
            failed: list[tuple[str, str]] = []
            for adapter in candidates:
                _install(module, adapter, _relayout(module, adapter, shared) if relayout else ())
                installed.append(module)
                ok, reason, entry.max_abs_error = _check(module, adapter, captured.get(name), seed)
                entry.kind, entry.kernels = adapter.kind, adapter.kernels
                if ok:
                    entry.reason = "; ".join([reason] * bool(reason) + [f"not {k}: {r}" for k, r in failed])
                    break
                _remove(module)
                installed.pop()
                failed.append((adapter.kind, reason))
            else:
                entry.status, entry.reason = "reverted", _reasons(failed)
                entry.kind = " or ".join(kind for kind, _ in failed)
                entry.kernels = tuple(dict.fromkeys(k for a in candidates for k in a.kernels))
    except BaseException:
        for module in installed:
            _remove(module)
        raise
    return report


def unswap(model: torch.nn.Module) -> int:
    """Restores the original forward of every swapped instance in ``model``; returns how many."""
    count = 0
    for module in model.modules():
        if _STATE in module.__dict__:
            _remove(module)
            count += 1
    return count


@contextmanager
def swapped(
    model: torch.nn.Module,
    report_or_plan: HotspotReport | None = None,
    verify: bool = True,
    relayout: bool = False,
) -> Iterator[SwapReport]:
    """``with torch_nki.swapped(model, report) as r:`` — swapped inside the block, restored after
    (relaid-out parameters included)."""
    result = swap(model, report_or_plan, verify, relayout)
    modules = dict(model.named_modules())
    root = type(model).__name__
    try:
        yield result
    finally:
        for entry in result.entries:
            if entry.status.startswith("swapped"):
                _remove(modules["" if entry.name == root else entry.name])

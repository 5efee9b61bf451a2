"""The CPU kernel and the fake kernel of an op, generated from its manifest entry.

Nothing here is specific to one op, and nothing here knows the contract: both kernels ask the
native module (a ``Signature``, checked once, for concrete shapes; ``symbolic`` for symbolic ones)
and only evaluate what it returns. Per-op data (parameter layout, a cache of checked signatures)
is precomputed once so that a call costs a few attribute lookups, one cached lookup and one native
call.
"""

from __future__ import annotations

import json
import operator
from collections.abc import Callable, Sequence
from typing import Any, Protocol

import torch

from torch_nki._dtypes import (
    DOWNCAST,
    INDEX_DOWNCAST,
    RETURNED,
    caller_name,
    narrow_indices,
    warn_downcast,
)
from torch_nki._manifest import OpSpec, Scalar
from torch_nki.errors import ContractShapeError

#: Output shapes and dtype names as the native ``Signature.outputs`` returns them.
Metas = list[tuple[tuple[int, ...], str]]

_SIGNATURE_CACHE_LIMIT = 4096


class NativeSignature(Protocol):
    """What the kernels use of a native ``Signature`` (one call's checked signature)."""

    def outputs(self) -> Metas: ...

    def run(self, inputs: Sequence[torch.Tensor | None], outputs: Sequence[torch.Tensor]) -> None: ...


class Native(Protocol):
    """What the kernels need from a native module (``torch_nki._native``)."""

    def Signature(
        self,
        name: str,
        shapes: Sequence[Sequence[int] | None],
        dtypes: Sequence[str | None],
        scalars: Sequence[Scalar],
    ) -> NativeSignature: ...

    def symbolic(
        self,
        name: str,
        shapes: Sequence[Sequence[Any] | None],
        dtypes: Sequence[str | None],
        scalars: Sequence[Any],
    ) -> str: ...


class Binder:
    """Completes a call's arguments: the dispatcher drops trailing arguments equal to their
    defaults (and passes kwarg-only ones as kwargs), so defaults are filled back in here."""

    def __init__(self, spec: OpSpec) -> None:
        self.op = spec.name
        self.qualname = spec.qualname
        self.params = spec.params
        self.n = len(spec.params)

    def __call__(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[Any, ...]:
        if len(args) == self.n and not kwargs:
            return args
        if len(args) > self.n:
            raise TypeError(f"{self.qualname}: takes {self.n} arguments, got {len(args)}")
        rest = self.params[len(args) :]
        unknown = sorted(set(kwargs) - {p.name for p in rest})
        if unknown:
            given = {p.name for p in self.params[: len(args)]}
            twice = [k for k in unknown if k in given]
            what = "given twice" if twice else "unknown"
            names = ", ".join(twice or unknown)
            raise TypeError(f"{self.qualname}: {what} argument {names} (parameters: {self._names()})")
        values = list(args)
        for p in rest:
            if p.name in kwargs:
                values.append(kwargs[p.name])
            elif p.has_default:
                values.append(p.default)  # None for an optional tensor or scalar
            else:
                raise TypeError(f"{self.qualname}: missing argument {p.name}")
        return tuple(values)

    def _names(self) -> str:
        return ", ".join(p.name for p in self.params)


class _Layout:
    """Where an op's tensors and scalars sit among its parameters."""

    def __init__(self, spec: OpSpec) -> None:
        self.bind = Binder(spec)
        self.tensors = tuple(i for i, p in enumerate(spec.params) if p.is_tensor)
        self.scalars = tuple(i for i, p in enumerate(spec.params) if not p.is_tensor)
        self.tensor_names = tuple(spec.params[i].name for i in self.tensors)
        self.single = spec.num_outputs == 1


def make_cpu_kernel(spec: OpSpec, native: Native) -> Callable[..., Any]:
    """The CPU kernel: the simulator running in place on the tensors' memory."""
    op = spec.name
    layout = _Layout(spec)
    # Locals, not attribute lookups, on the per-call path.
    bind, t_idx, s_idx = layout.bind, layout.tensors, layout.scalars
    names_of, single = layout.tensor_names, layout.single
    cache: dict[
        tuple[Any, ...], tuple[NativeSignature, list[tuple[tuple[int, ...], torch.dtype, torch.dtype]]]
    ] = {}
    make_signature, f64 = native.Signature, torch.float64

    def cpu_kernel(*args: Any, **kwargs: Any) -> Any:
        args = bind(args, kwargs)
        tensors: list[torch.Tensor | None] = [args[i] for i in t_idx]
        scalars = [args[i] for i in s_idx]
        for i, t in enumerate(tensors):
            if t is not None and not t.is_cpu:
                raise ValueError(
                    f"{spec.qualname}: {names_of[i]} is on device {t.device}, but this kernel "
                    f"(the CPU simulator) needs every tensor on cpu"
                )
        shapes = tuple(None if t is None else t.shape for t in tensors)
        dtypes = tuple(None if t is None else caller_name(t.dtype) for t in tensors)
        # Typed: `1 == 1.0 == True`, but each is another argument to the contract.
        key = (shapes, dtypes, *((type(s), s) for s in scalars))
        entry = cache.get(key)
        if entry is None:
            sig = make_signature(op, shapes, dtypes, scalars)
            metas = []
            for s, name in sig.outputs():
                returned = RETURNED[name]
                metas.append((tuple(s), DOWNCAST.get(returned, returned), returned))
            entry = (sig, metas)
            if len(cache) < _SIGNATURE_CACHE_LIMIT:
                cache[key] = entry
        sig, metas = entry
        for i, t in enumerate(tensors):
            if t is not None:
                narrow = DOWNCAST.get(t.dtype)
                if narrow is not None:
                    warn_downcast(op, t.dtype)
                    tensors[i] = t.to(narrow)
                elif t.dtype in INDEX_DOWNCAST:
                    tensors[i] = narrow_indices(op, names_of[i], t)
        outs = [torch.empty(s, dtype=computed) for s, computed, _ in metas]
        if any(o.numel() for o in outs):
            # The native side reads device, contiguity, pointer, shape and dtype itself.
            sig.run(tensors, outs)
        outs = [o if o.dtype is r else o.to(f64) for o, (_, _, r) in zip(outs, metas, strict=True)]
        return outs[0] if single else tuple(outs)

    cpu_kernel.__name__ = f"{spec.namespace}_{op}_cpu"
    cpu_kernel.__qualname__ = cpu_kernel.__name__
    return cpu_kernel


def _is_plain(values: Sequence[Any]) -> bool:
    return all(type(v) in (int, float, bool) for v in values)


_BINARY: dict[str, Callable[[Any, Any], Any]] = {
    "add": lambda a, b: a + b,
    "sub": lambda a, b: a - b,
    "mul": lambda a, b: a * b,
    "div": lambda a, b: a // b,
    "rem": lambda a, b: a % b,
}


COMPARE: dict[str, Callable[[Any, Any], Any]] = {
    "eq": operator.eq,
    "ne": operator.ne,
    "lt": operator.lt,
    "le": operator.le,
    "gt": operator.gt,
    "ge": operator.ge,
}


def evaluate(expr: dict[str, Any], shapes: Sequence[Sequence[Any] | None]) -> Any:
    """Evaluates an expression the native ``symbolic`` returned on the inputs' (Sym)Int dims."""
    kind = expr["kind"]
    if kind == "dim":
        shape = shapes[expr["tensor"]]
        assert shape is not None, f"a dimension of tensor {expr['tensor']}, which was left out"
        return shape[expr["axis"]]
    if kind == "const":
        return int(expr["value"])
    return _BINARY[expr["op"]](evaluate(expr["lhs"], shapes), evaluate(expr["rhs"], shapes))


def _message(text: str) -> Callable[[], str]:
    """A message for ``torch._check_with`` (called only when the check fails)."""
    return lambda: text


def make_fake_kernel(spec: OpSpec, native: Native) -> Callable[..., Any]:
    """The fake (meta) kernel: output shapes and dtypes from the contract, no data touched.

    With concrete shapes the Rust contract check runs, so contract errors surface while tracing.
    With symbolic shapes Rust returns each output dim as an expression over input dims, and the
    comparisons between unknown sizes (equalities the patterns imply, ``require`` clauses) with
    their messages; they are evaluated on the ``SymInt``s here (assertions, not guards on
    specific values).
    """
    op = spec.name
    layout = _Layout(spec)

    def fake_kernel(*args: Any, **kwargs: Any) -> Any:
        args = layout.bind(args, kwargs)
        tensors: list[torch.Tensor | None] = [args[i] for i in layout.tensors]
        scalars = [args[i] for i in layout.scalars]
        present = [(n, t) for n, t in zip(layout.tensor_names, tensors, strict=True) if t is not None]
        first_name, like = present[0]
        for name, t in present:
            if t.device != like.device:
                raise ValueError(
                    f"{spec.qualname}: {name} is on device {t.device}, but {first_name} is on "
                    f"{like.device}; every tensor must be on the same device"
                )
        dtypes = [None if t is None else caller_name(t.dtype) for t in tensors]
        shapes = [None if t is None else tuple(t.shape) for t in tensors]
        out_shapes: list[Sequence[Any]]
        if all(type(d) is int for s in shapes if s is not None for d in s) and _is_plain(scalars):
            metas = native.Signature(op, shapes, dtypes, scalars).outputs()
            out_shapes = [s for s, _ in metas]
            out_dtypes = [RETURNED[d] for _, d in metas]
        else:
            doc = json.loads(native.symbolic(op, shapes, dtypes, scalars))
            for c in doc["checks"]:
                torch._check_with(
                    ContractShapeError,
                    COMPARE[c["op"]](evaluate(c["lhs"], shapes), evaluate(c["rhs"], shapes)),
                    _message(c["message"]),
                )
            out_shapes = [[evaluate(e, shapes) for e in shape] for shape in doc["shapes"]]
            out_dtypes = [RETURNED[d] for d in doc["dtypes"]]
        outs = [like.new_empty(s, dtype=d) for s, d in zip(out_shapes, out_dtypes, strict=True)]
        return outs[0] if layout.single else tuple(outs)

    fake_kernel.__name__ = f"{spec.namespace}_{op}_fake"
    fake_kernel.__qualname__ = fake_kernel.__name__
    return fake_kernel

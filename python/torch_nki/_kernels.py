"""The CPU kernel and the fake kernel of an op, generated from its manifest entry.

Nothing here is specific to one op: every registered kernel gets the same two closures, with
the per-op data (parameter layout, contract, output-meta cache) precomputed once so that a call
costs a few attribute lookups, one cached contract lookup and one native call.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Protocol

import torch

from torch_nki._contract import ContractEval
from torch_nki._dtypes import DOWNCAST, NKI_TO_TORCH, TORCH_TO_NKI, warn_downcast
from torch_nki._manifest import OpSpec, Scalar

Buffer = tuple[int, Sequence[int], str]
#: Output shapes and dtypes as ``_native.check`` returns them.
Metas = list[tuple[tuple[int, ...], str]]

_META_CACHE_LIMIT = 4096


class Native(Protocol):
    """What the kernels need from a native module (``torch_nki._native``)."""

    def check(
        self, name: str, shapes: Sequence[Sequence[int]], dtypes: Sequence[str], scalars: Sequence[Scalar]
    ) -> Metas: ...

    def run(
        self, name: str, inputs: Sequence[Buffer], scalars: Sequence[Scalar], outputs: Sequence[Buffer]
    ) -> None: ...


class _Binder:
    """Completes a call's arguments: the dispatcher drops trailing arguments equal to their
    defaults (and passes kwarg-only ones as kwargs), so defaults are filled back in here."""

    def __init__(self, spec: OpSpec) -> None:
        self.op = spec.name
        self.params = spec.params
        self.n = len(spec.params)

    def __call__(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[Any, ...]:
        if len(args) == self.n and not kwargs:
            return args
        if len(args) > self.n:
            raise TypeError(f"neuron::{self.op}: takes {self.n} arguments, got {len(args)}")
        values = list(args)
        for p in self.params[len(args) :]:
            if p.name in kwargs:
                values.append(kwargs[p.name])
            elif p.has_default:
                values.append(p.default)
            else:
                raise TypeError(f"neuron::{self.op}: missing argument {p.name}")
        return tuple(values)


class _Layout:
    """Where an op's tensors and scalars sit among its parameters."""

    def __init__(self, spec: OpSpec) -> None:
        self.bind = _Binder(spec)
        self.tensors = tuple(i for i, p in enumerate(spec.params) if p.is_tensor)
        self.scalars = tuple(i for i, p in enumerate(spec.params) if not p.is_tensor)
        self.tensor_names = tuple(spec.params[i].name for i in self.tensors)
        self.single = spec.num_outputs == 1


def make_cpu_kernel(spec: OpSpec, native: Native, contract: ContractEval) -> Callable[..., Any]:
    """The CPU kernel: the simulator running in place on the tensors' memory."""
    op = spec.name
    layout = _Layout(spec)
    # Locals, not attribute lookups, on the per-call path.
    bind, t_idx, s_idx = layout.bind, layout.tensors, layout.scalars
    names_of, single = layout.tensor_names, layout.single
    cache: dict[tuple[Any, ...], list[tuple[tuple[int, ...], str, torch.dtype]]] = {}
    check, run, to_nki, f32 = native.check, native.run, TORCH_TO_NKI, torch.float32

    def cpu_kernel(*args: Any, **kwargs: Any) -> Any:
        args = bind(args, kwargs)
        tensors: list[torch.Tensor] = [args[i] for i in t_idx]
        scalars = [args[i] for i in s_idx]
        widen: torch.dtype | None = None
        names: list[str] = []
        for i, t in enumerate(tensors):
            if not t.is_cpu:
                raise ValueError(
                    f"neuron::{op}: {names_of[i]} is on device {t.device}, but this kernel "
                    f"(the CPU simulator) needs every tensor on cpu"
                )
            name = to_nki.get(t.dtype)
            if name is None:
                narrow = DOWNCAST.get(t.dtype)
                if narrow is None:
                    raise contract.dtype_error(
                        [DOWNCAST.get(x.dtype, x.dtype) for x in tensors]
                    ) or TypeError(f"neuron::{op}: {names_of[i]} has unsupported dtype {t.dtype}")
                warn_downcast(op, t.dtype)
                widen = t.dtype
                t = t.to(narrow)
                name = to_nki[narrow]
            if not t.is_contiguous():
                t = t.contiguous()
            tensors[i] = t
            names.append(name)
        shapes = tuple(t.shape for t in tensors)
        key = (shapes, tuple(names))
        metas = cache.get(key)
        if metas is None:
            metas = [(tuple(s), d, NKI_TO_TORCH[d]) for s, d in check(op, shapes, names, scalars)]
            if len(cache) < _META_CACHE_LIMIT:
                cache[key] = metas
        outs = [torch.empty(s, dtype=td) for s, _, td in metas]
        if any(o.numel() for o in outs):
            run(
                op,
                [(t.data_ptr(), t.shape, n) for t, n in zip(tensors, names, strict=True)],
                scalars,
                [(o.data_ptr(), o.shape, d) for o, (_, d, _) in zip(outs, metas, strict=True)],
            )
        if widen is not None:
            outs = [o.to(widen) if o.dtype == f32 else o for o in outs]
        return outs[0] if single else tuple(outs)

    cpu_kernel.__name__ = f"neuron_{op}_cpu"
    cpu_kernel.__qualname__ = cpu_kernel.__name__
    return cpu_kernel


def _is_plain(values: Sequence[Any]) -> bool:
    return all(type(v) in (int, float, bool) for v in values)


def make_fake_kernel(spec: OpSpec, native: Native, contract: ContractEval) -> Callable[..., Any]:
    """The fake (meta) kernel: output shapes and dtypes from the contract, no data touched.

    With concrete shapes the Rust contract check runs too, so contract errors surface while
    tracing. With symbolic shapes the output dims are evaluated on the ``SymInt``s directly.
    """
    op = spec.name
    layout = _Layout(spec)
    f32, f64 = torch.float32, torch.float64

    def fake_kernel(*args: Any, **kwargs: Any) -> Any:
        args = layout.bind(args, kwargs)
        tensors: list[torch.Tensor] = [args[i] for i in layout.tensors]
        scalars = [args[i] for i in layout.scalars]
        like = tensors[0]
        for name, t in zip(layout.tensor_names, tensors, strict=True):
            if t.device != like.device:
                raise ValueError(
                    f"neuron::{op}: {name} is on device {t.device}, but {layout.tensor_names[0]} is on "
                    f"{like.device}; every tensor must be on the same device"
                )
        dtypes = [DOWNCAST.get(t.dtype, t.dtype) for t in tensors]
        widen = any(t.dtype in DOWNCAST for t in tensors)
        if any(d not in TORCH_TO_NKI for d in dtypes):
            err = contract.dtype_error(dtypes)
            if err is not None:
                raise err
        shapes = [tuple(t.shape) for t in tensors]
        out_shapes: list[Sequence[Any]]
        if all(type(d) is int for s in shapes for d in s) and _is_plain(scalars):
            metas = native.check(op, shapes, [TORCH_TO_NKI[d] for d in dtypes], scalars)
            out_shapes = [s for s, _ in metas]
            out_dtypes = [NKI_TO_TORCH[d] for _, d in metas]
        else:
            out_shapes = list(contract.output_shapes(shapes))
            out_dtypes = contract.output_dtypes(dtypes)
        if widen:
            out_dtypes = [f64 if d == f32 else d for d in out_dtypes]
        outs = [like.new_empty(s, dtype=d) for s, d in zip(out_shapes, out_dtypes, strict=True)]
        return outs[0] if layout.single else tuple(outs)

    fake_kernel.__name__ = f"neuron_{op}_fake"
    fake_kernel.__qualname__ = fake_kernel.__name__
    return fake_kernel

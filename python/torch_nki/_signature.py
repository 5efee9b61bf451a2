"""``torch_nki.kernel(op).signature(*args, **kwargs)``: one call of an op, checked once.

A :class:`Signature` is an op's call (its tensors' shapes and dtypes, its scalars) parsed and
checked against the op's contract once, in Rust; running it, estimating its cost, emitting its
NKI source or tracing its program then needs no parsing or checking again, and each target's
program is compiled once (through the compile cache). Tensors are only looked at for their shape
and dtype, so ``meta`` tensors work::

    sig = torch_nki.kernel("rmsnorm").signature(torch.empty(300, 1000, device="meta"),
                                                torch.empty(1000, device="meta"), 1e-6)
    sig.outputs                  # [((300, 1000), torch.float32), ((300,), torch.float32)]
    sig.cost("trn2")             # a CostReport, as torch_nki.cost
    sig.emit("trn2")             # the NKI source, as torch_nki.emit
    y, rstd = sig.run(x, w)      # every output, on CPU tensors of the signature

``torch_nki.cost`` and ``torch_nki.emit`` are this with the signature made on the spot.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import torch

from torch_nki._dtypes import DOWNCAST, INDEX_DOWNCAST, RETURNED, caller_name, narrow_indices
from torch_nki._kernels import Binder

if TYPE_CHECKING:
    from torch_nki import _native
    from torch_nki._cost import CostReport
    from torch_nki._manifest import OpSpec

__all__ = ["Kernel", "Signature", "kernel"]


class Signature:
    """One checked call of an op (see the module documentation); made by
    :meth:`Kernel.signature`."""

    def __init__(
        self,
        op: str,
        spec: OpSpec,
        native: _native.Signature,
        shapes: list[tuple[int, ...] | None],
        dtypes: list[str | None],
        scalars: list[Any],
    ) -> None:
        self.op = op
        """The op as :func:`kernel` was given it (``name``, or ``ns::name``)."""
        self.spec = spec
        self.native = native
        """The native handle (``torch_nki._native.Signature``)."""
        self.shapes = shapes
        """Each tensor parameter's shape (``None``: an optional tensor left out)."""
        self.dtypes = dtypes
        """Each tensor parameter's dtype as the contract takes it (``bf16``, ``f64``, ...)."""
        self.scalars = scalars
        """The scalar arguments, in parameter order."""

    def __repr__(self) -> str:
        tensors = ", ".join(
            "None" if s is None else f"{d}[{', '.join(map(str, s))}]"
            for s, d in zip(self.shapes, self.dtypes, strict=True)
        )
        scalars = "".join(f", {s!r}" for s in self.scalars)
        return f"Signature({self.op}: {tensors}{scalars})"

    @property
    def outputs(self) -> list[tuple[tuple[int, ...], torch.dtype]]:
        """Each output's shape and dtype, in return order (``saved`` outputs included), as a
        call returns them."""
        return [(tuple(shape), RETURNED[dtype]) for shape, dtype in self.native.outputs()]

    def run(self, *tensors: torch.Tensor | None) -> torch.Tensor | tuple[torch.Tensor, ...]:
        """Runs the op on the simulator on CPU ``tensors`` of this signature (the tensor
        arguments in parameter order, ``None`` for an optional one left out); returns every
        output (one tensor, or a tuple for several)."""
        names = [p.name for p in self.spec.params if p.is_tensor]
        inputs: list[torch.Tensor | None] = list(tensors)
        for i, t in enumerate(inputs):
            if t is not None:
                if t.dtype in DOWNCAST:
                    inputs[i] = t.to(DOWNCAST[t.dtype])
                elif t.dtype in INDEX_DOWNCAST and i < len(names):
                    inputs[i] = narrow_indices(self.spec.name, names[i], t)
        outputs = self.outputs
        returned = [dtype for _, dtype in outputs]
        outs = [torch.empty(shape, dtype=DOWNCAST.get(dtype, dtype)) for shape, dtype in outputs]
        if any(o.numel() for o in outs):
            self.native.run(inputs, outs)
        outs = [o if o.dtype is r else o.to(r) for o, r in zip(outs, returned, strict=True)]
        return outs[0] if len(outs) == 1 else tuple(outs)

    def cost(self, target: str = "trn2") -> CostReport:
        """The cost model's estimate on ``target`` (``trn1``, ``trn2``, ``trn3``)."""
        from torch_nki._cost import report

        return report(self.op, *self.native.cost(target))

    def emit(self, target: str = "trn2") -> str:
        """The NKI Python source for ``target`` (kept in the persistent cache)."""
        from torch_nki._emit import warn_status

        source, status = self.native.emit(target)
        warn_status(status)
        return source

    def program(self, target: str = "trn2") -> _native.Program:
        """The program the op's Rust kernel traces on ``target``."""
        return self.native.program(target)

    def tolerances(self) -> list[tuple[float, float] | None]:
        """``(rtol, atol)`` of each output (``saved`` ones included) against the op's reference,
        from its tolerance class; ``None`` for a dtype without a rule."""
        return list(self.native.tolerance())

    def index_domains(self) -> list[tuple[int, int, int | None] | None]:
        """The index range each tensor parameter declares (``Hbm::require_indices``), or
        ``None``."""
        return list(self.native.index_domains())


class Kernel:
    """An op of a torch-nki native module, by name (see :func:`kernel`)."""

    def __init__(self, op: str) -> None:
        from torch_nki.testing import _lookup

        reg, spec = _lookup(op)
        self.op = op
        self.spec = spec
        self._native = reg.native
        self._bind = Binder(spec)

    def __repr__(self) -> str:
        return f"Kernel({self.spec.qualname})"

    def signature(self, *args: Any, **kwargs: Any) -> Signature:
        """The call ``torch.ops.<ns>.<op>(*args, **kwargs)`` as a :class:`Signature`, checked
        against the contract (a violation raises as the call would). Tensors are only looked at
        for their shape and dtype."""
        values = self._bind(args, kwargs)
        shapes: list[tuple[int, ...] | None] = []
        dtypes: list[str | None] = []
        scalars: list[Any] = []
        for p, v in zip(self.spec.params, values, strict=True):
            if p.is_tensor:
                if v is not None and not isinstance(v, torch.Tensor):
                    raise TypeError(
                        f"{self.spec.qualname}: {p.name} must be a tensor, got {type(v).__name__}"
                    )
                shapes.append(None if v is None else tuple(v.shape))
                dtypes.append(None if v is None else caller_name(v.dtype))
            else:
                scalars.append(v)
        native = self._native.Signature(self.spec.name, shapes, dtypes, scalars)
        return Signature(self.op, self.spec, native, shapes, dtypes, scalars)


def kernel(op: str) -> Kernel:
    """The op ``op`` (``name`` in ``torch.ops.neuron``, or ``ns::name`` for a kernel crate loaded
    into another namespace); :class:`~torch_nki.errors.UnknownOpError` for an op no
    registration has."""
    return Kernel(op)

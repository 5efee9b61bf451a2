"""Autograd for every op, generated from the kernels' ``backward(...)`` declarations.

A forward kernel names its backward kernel (itself a registered op) and what it saves; the
backward kernel's parameters say what it takes, by name: ``grad_<output>`` (the gradient of a
forward output), a saved forward input or output, or a forward scalar. Its outputs are
``grad_<input>``. :func:`rule_for` turns that into the ``setup_context``/``backward`` pair that
``torch.library.register_autograd`` wants. Nothing here is specific to one op.

An op without a backward kernel (every backward kernel included, so double backward) still gets
a rule: its ``backward`` raises, naming the op, when a gradient is actually requested.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch

from torch_nki._manifest import OpSpec

GRAD_PREFIX = "grad_"


@dataclass(frozen=True)
class AutogradRule:
    """``setup_context(ctx, inputs, output)`` saves what ``backward(ctx, *grads)`` needs."""

    setup_context: Callable[..., None]
    backward: Callable[..., Any]


class NoBackwardError(RuntimeError):
    """A gradient was requested through an op that declares no backward kernel."""


def _no_backward(spec: OpSpec) -> AutogradRule:
    def setup_context(ctx: Any, inputs: tuple[Any, ...], output: Any) -> None:
        pass

    def backward(ctx: Any, *grads: Any) -> tuple[None, ...]:
        what = (
            f"it is the backward kernel of `{spec.backward_of}` and has no backward of its own "
            "(double backward is not supported)"
            if spec.backward_of
            else "its kernel declares no `backward(...)`"
        )
        raise NoBackwardError(
            f"neuron::{spec.name}: cannot compute gradients: {what} (defined at {spec.location})"
        )

    return AutogradRule(setup_context, backward)


def rule_for(spec: OpSpec, ops: dict[str, OpSpec], op_of: Callable[[str], Any]) -> AutogradRule:
    """The autograd rule of ``spec`` (whose op returns every kernel output); ``ops`` are all
    kernels by name and ``op_of(name)`` the registered op overload of a kernel."""
    if spec.backward is None:
        return _no_backward(spec)
    bwd = ops[spec.backward.kernel]
    saves = spec.backward.saves
    names = [p.name for p in spec.params]
    out_names = [o.name for o in spec.outputs]
    tensor_pos = {p.name: i for i, p in enumerate(spec.params) if p.is_tensor}
    saved_outputs = [i for i, o in enumerate(spec.outputs) if o.saved]
    # Where each backward argument comes from: ("grad", output index), ("saved", index into
    # saves) or ("scalar", forward parameter index).
    plan: list[tuple[str, int]] = []
    for p in bwd.params:
        if not p.is_tensor:
            plan.append(("scalar", names.index(p.name)))
        elif p.name.startswith(GRAD_PREFIX) and p.name[len(GRAD_PREFIX) :] in out_names:
            plan.append(("grad", out_names.index(p.name[len(GRAD_PREFIX) :])))
        else:
            plan.append(("saved", saves.index(p.name)))
    # Which forward input each backward output is the gradient of.
    grad_of = [tensor_pos[o.name[len(GRAD_PREFIX) :]] for o in bwd.outputs]
    single_out = len(spec.outputs) == 1

    def setup_context(ctx: Any, inputs: tuple[Any, ...], output: Any) -> None:
        outs = (output,) if single_out else tuple(output)
        values = dict(zip(names, inputs, strict=True))
        values.update(zip(out_names, outs, strict=True))
        ctx.save_for_backward(*(values[n] for n in saves))
        ctx.nki_scalars = inputs
        ctx.nki_out_meta = [(o.shape, o.dtype, o.device) for o in outs]
        if saved_outputs:
            ctx.mark_non_differentiable(*(outs[i] for i in saved_outputs))

    def backward(ctx: Any, *grads: Any) -> tuple[Any, ...]:
        saved = ctx.saved_tensors
        args: list[Any] = []
        for kind, i in plan:
            if kind == "scalar":
                args.append(ctx.nki_scalars[i])
            elif kind == "saved":
                args.append(saved[i])
            else:
                g = grads[i]
                if g is None:
                    shape, dtype, device = ctx.nki_out_meta[i]
                    g = torch.zeros(shape, dtype=dtype, device=device)
                args.append(g)
        result = op_of(bwd.name)(*args)
        results = (result,) if len(grad_of) == 1 else tuple(result)
        out: list[Any] = [None] * len(names)
        for pos, g in zip(grad_of, results, strict=True):
            if ctx.needs_input_grad[pos]:
                out[pos] = g
        return tuple(out)

    return AutogradRule(setup_context, backward)

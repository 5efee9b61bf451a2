"""Autograd for every op, generated from the kernels' ``backward(...)`` declarations.

A forward kernel names its backward kernel (itself a registered op) and what it saves; the
backward kernel's parameters say what it takes, by name: ``grad_<output>`` (the gradient of a
forward output), a saved forward input or output, or a forward scalar. Its outputs are
``grad_<input>``. Rust resolves those names once into the op's backward plan (by position; see
:mod:`torch_nki._backward`); :func:`rule_for` carries the plan out as a
``setup_context``/``backward`` pair and :func:`make_autograd_kernel` makes the op's ``Autograd``
dispatch kernel. Nothing here is specific to one op.

The kernel is an ``autograd.Function`` whose ``jvp`` raises an error naming the op: no kernel
declares a forward-mode rule, and silently returning zero tangents (what an op registered with
``register_autograd`` does under forward-mode AD) is worse than an error. ``torch.func``'s
autograd transforms (``grad``, ``vjp``, ``jvp``) cannot run an ``autograd.Function`` from inside
the dispatcher, so under them the op raises, naming itself, instead of torch's internal error;
``torch.func.vmap`` works (per-sample fallback). An op without a backward kernel (every backward kernel
included, so double backward) raises, naming the op, when a gradient is actually requested.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
import torch.autograd.forward_ad as _forward_ad
from torch._C import _functorch

from torch_nki._kernels import Binder
from torch_nki._manifest import OpSpec
from torch_nki.errors import NoBackwardError, UnsupportedTransformError


@dataclass(frozen=True)
class AutogradRule:
    """``setup_context(ctx, inputs, output)`` saves what ``backward(ctx, *grads)`` needs."""

    setup_context: Callable[..., None]
    backward: Callable[..., Any]


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
        err = NoBackwardError(
            f"{spec.qualname}: cannot compute gradients: {what} (defined at {spec.location})"
        )
        err.op = spec.name
        raise err

    return AutogradRule(setup_context, backward)


def _zeros(shape: Any, dtype: torch.dtype, device: torch.device, mesh: Any) -> torch.Tensor:
    """The zero gradient of an output no loss used: a replicated DTensor on ``mesh`` for a
    DTensor output (the backward kernel's other arguments are DTensors)."""
    if mesh is None:
        return torch.zeros(shape, dtype=dtype, device=device)
    from torch.distributed.tensor import Replicate, zeros

    result: torch.Tensor = zeros(shape, dtype=dtype, device_mesh=mesh, placements=[Replicate()] * mesh.ndim)
    return result


def rule_for(spec: OpSpec, ops: dict[str, OpSpec], op_of: Callable[[str], Any]) -> AutogradRule:
    """The autograd rule of ``spec`` (whose op returns every kernel output), carrying out its
    backward plan (:mod:`torch_nki._backward`); ``ops`` are all kernels by name and
    ``op_of(name)`` the registered op overload of a kernel."""
    if spec.backward is None:
        return _no_backward(spec)
    plan = spec.backward
    bwd = ops[plan.kernel]
    num_params = len(spec.params)
    saved_outputs = [i for i, o in enumerate(spec.outputs) if o.saved]
    single_out = len(spec.outputs) == 1

    def setup_context(ctx: Any, inputs: tuple[Any, ...], output: Any) -> None:
        outs = (output,) if single_out else tuple(output)
        ctx.save_for_backward(*plan.saved_values(inputs, outs))
        ctx.nki_scalars = inputs
        # Unused outputs' gradients arrive as None and are made here: autograd would make plain
        # zeros, where a DTensor output's must be a DTensor on its mesh.
        ctx.set_materialize_grads(False)
        ctx.nki_out_meta = [(o.shape, o.dtype, o.device, getattr(o, "device_mesh", None)) for o in outs]
        if saved_outputs:
            ctx.mark_non_differentiable(*(outs[i] for i in saved_outputs))

    def backward(ctx: Any, *grads: Any) -> tuple[Any, ...]:
        def gradient(i: int) -> Any:
            g = grads[i]
            if g is None:
                shape, dtype, device, mesh = ctx.nki_out_meta[i]
                g = _zeros(shape, dtype, device, mesh)
            return g

        result = op_of(bwd.name)(*plan.arguments(ctx.saved_tensors, ctx.nki_scalars, gradient))
        results = (result,) if len(plan.grads) == 1 else tuple(result)
        out: list[Any] = [None] * num_params
        for pos, g in zip(plan.grads, results, strict=True):
            if ctx.needs_input_grad[pos]:
                out[pos] = g
        return tuple(out)

    return AutogradRule(setup_context, backward)


def make_autograd_kernel(spec: OpSpec, op_name: str, rule: AutogradRule) -> Callable[..., Any]:
    """The ``Autograd`` kernel (registered ``with_keyset=True``) of op ``op_name``, which computes
    kernel ``spec``: below autograd when no gradient can flow, through a generated
    ``autograd.Function`` otherwise (and under forward-mode AD, whose ``jvp`` raises naming the
    op)."""
    binder = Binder(spec)
    op: Any = None

    def below_autograd(keyset: Any, args: tuple[Any, ...]) -> Any:
        nonlocal op
        if op is None:
            op = getattr(getattr(torch.ops, spec.namespace), op_name).default
        with torch._C._AutoDispatchBelowAutograd():
            return op.redispatch(keyset & torch._C._after_autograd_keyset, *args)

    def unsupported(what: str, why: str) -> UnsupportedTransformError:
        err = UnsupportedTransformError(
            f"{spec.qualname}: {what} cannot run through this op: {why} (defined at {spec.location})"
        )
        err.op = spec.name
        return err

    class Generated(torch.autograd.Function):
        @staticmethod
        def forward(*args: Any) -> Any:
            return below_autograd(args[-1], args[:-1])

        @staticmethod
        def setup_context(ctx: Any, inputs: tuple[Any, ...], output: Any) -> None:
            rule.setup_context(ctx, binder(inputs[:-1], {}), output)

        @staticmethod
        def backward(ctx: Any, *grads: Any) -> Any:
            needs = ctx.needs_input_grad
            passed = len(needs) - 1
            try:
                ctx.needs_input_grad = needs[:-1] + (False,) * (len(spec.params) - passed)
                result = rule.backward(ctx, *grads)
            finally:
                ctx.needs_input_grad = needs
            return (*result[:passed], None)

        @staticmethod
        def jvp(ctx: Any, *tangents: Any) -> Any:
            raise unsupported(
                "forward-mode AD (torch.autograd.forward_ad)", "the kernel declares no forward-mode rule"
            )

    Generated.__name__ = f"NeuronAutograd_{op_name}"

    # The single-level `apply`: this kernel already runs inside the dispatcher, at the level a
    # torch.func transform unwrapped to, so the multi-level entry (a higher-order op dispatched
    # from the top) must not be used here.
    apply = super(torch.autograd.Function, Generated).apply

    def autograd_kernel(keyset: Any, *args: Any) -> Any:
        if _functorch.maybe_current_level() is not None:
            raise unsupported(
                "torch.func.grad / vjp / jvp / jacrev / jacfwd",
                "autograd.Function-based ops cannot run under torch.func's autograd transforms from "
                "inside the dispatcher; use torch.autograd.grad or .backward() (torch.func.vmap works)",
            )
        if _forward_ad._current_level >= 0 or (
            torch.is_grad_enabled() and torch._C._any_requires_grad(*args)
        ):
            return apply(*args, keyset)
        return below_autograd(keyset, args)

    autograd_kernel.__name__ = f"{spec.namespace}_{op_name}_autograd"
    return autograd_kernel

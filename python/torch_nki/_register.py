"""Registers a native module's ops in the ``neuron`` namespace of ``torch.library``.

Per kernel: ``define`` (schema from the manifest), the CPU kernel (the simulator), the fake
kernel (from the contract) and autograd (from the kernel's ``backward(...)`` declaration, see
:mod:`torch_nki.autograd`). A kernel with ``saved`` outputs (rmsnorm's ``rstd``) is registered as
two ops, the way ATen pairs ``layer_norm`` with ``native_layer_norm``: ``<name>_fwd`` returns
every output and carries the CPU, fake and autograd kernels; ``<name>`` is a
``CompositeImplicitAutograd`` op that calls it and returns the public outputs.

The low-level ``Library``/``define``/``impl`` path costs about half of ``custom_op`` per call.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any

import torch

from torch_nki import autograd
from torch_nki._autocast import register_autocast
from torch_nki._kernels import make_cpu_kernel, make_fake_kernel
from torch_nki._manifest import OpSpec, parse

NAMESPACE = "neuron"


@dataclass
class Registration:
    """The ops one native module registered; keeps the ``Library`` alive (registrations live as
    long as it does)."""

    native: ModuleType
    manifest_json: str
    ops: dict[str, OpSpec]
    libs: list[torch.library.Library] = field(default_factory=list)


_lock = threading.Lock()
_registrations: dict[str, Registration] = {}


def _op(name: str) -> Any:
    return getattr(getattr(torch.ops, NAMESPACE), name).default


def _public_outputs(spec: OpSpec, fwd_name: str) -> Callable[..., Any]:
    """The ``CompositeImplicitAutograd`` kernel of an op with saved outputs."""
    keep = [i for i, o in enumerate(spec.outputs) if not o.saved]
    single = keep[0] if len(keep) == 1 else None
    fwd: list[Any] = []  # the op, looked up on first call (it is defined after this kernel)

    def public(*args: Any, **kwargs: Any) -> Any:
        if not fwd:
            fwd.append(_op(fwd_name))
        outs = fwd[0](*args, **kwargs)
        return outs[single] if single is not None else tuple(outs[i] for i in keep)

    public.__name__ = f"neuron_{spec.name}"
    return public


def _register_op(
    lib: torch.library.Library, spec: OpSpec, ops: dict[str, OpSpec], native: ModuleType
) -> None:
    tags = (torch.Tag.pt2_compliant_tag,)
    kernel_name, kernel_schema = spec.forward_op or (spec.name, spec.schema)
    lib.define(kernel_schema, tags=tags)
    lib.impl(kernel_name, make_cpu_kernel(spec, native), "CPU")
    qualname = f"{NAMESPACE}::{kernel_name}"
    torch.library.register_fake(qualname, make_fake_kernel(spec, native), lib=lib)
    rule = autograd.rule_for(spec, ops, _op)
    lib.impl(
        kernel_name, autograd.make_autograd_kernel(spec, kernel_name, rule), "Autograd", with_keyset=True
    )
    register_autocast(lib, spec, kernel_name)
    if spec.forward_op is not None:
        lib.define(spec.schema, tags=tags)
        lib.impl(spec.name, _public_outputs(spec, kernel_name), "CompositeImplicitAutograd")


def register(native: ModuleType) -> Registration:
    """Registers every op of ``native`` (a module with ``manifest``/``check``/``run``) once."""
    with _lock:
        done = _registrations.get(native.__name__)
        if done is not None:
            return done
        text = native.manifest()
        specs = parse(text)
        by_name = {s.name: s for s in specs}
        lib = torch.library.Library(NAMESPACE, "FRAGMENT")
        for spec in specs:
            try:
                _register_op(lib, spec, by_name, native)
            except Exception as err:
                raise RuntimeError(
                    f"torch_nki: could not register {spec.qualname} (defined at {spec.location}): {err}"
                ) from err
        reg = Registration(native, text, by_name, [lib])
        _registrations[native.__name__] = reg
        return reg

"""DTensor sharding strategies for every op, registered from the kernels' contracts.

For every kernel of every registration (the package's own and each :func:`torch_nki.load`),
the op DTensor dispatches (``<name>``, or ``<name>_fwd`` for a kernel with ``saved`` outputs,
and the hidden autograd twin of the fast path) gets a strategy through the public
``torch.distributed.tensor.experimental.register_sharding``. The strategy function is the same
for every op: it computes the call's strategies from the op's derived dimension semantics
(:mod:`torch_nki._sharding`) and maps them to DTensor placements. Nothing lists ops: a new
kernel is picked up from the registry.

One private DTensor API is used, because the public one cannot express it:
``register_sharding`` keys DTensor's sharding cache on a call's tensors and its ``int``
arguments only, so a ``bool`` such as ``flash_attention``'s ``causal`` or a string such as
``cross_entropy``'s ``reduction`` would reuse the rule computed for another value. After
registering, :func:`register` replaces the op's ``RuntimeSchemaInfo`` in DTensor's sharding
propagator (``DTensor._op_dispatcher.sharding_propagator.op_to_schema_info``) with one whose
static arguments are every scalar parameter (docs/distributed.md).

Importing ``torch.distributed.tensor`` costs seconds, so this happens when DTensor is first
imported (a post-import hook installed by ``import torch_nki``), or at once if it already was.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import sys
import threading
from types import ModuleType
from typing import Any

import torch

from torch_nki import _sharding
from torch_nki._dtypes import caller_name
from torch_nki._manifest import OpSpec
from torch_nki._register import GRAD_PREFIX, Registration, registrations

__all__ = ["register", "registered_ops"]

_DTENSOR = "torch.distributed.tensor"
_lock = threading.RLock()
_done: dict[str, Any] = {}
"""Each registered op's overload, by qualified name (an op registered again, after
``torch_nki._register.unregister``, is a new overload and gets its strategy again)."""


def registered_ops() -> list[str]:
    """The qualified op names (``neuron::rmsnorm_fwd``) that have a DTensor strategy."""
    with _lock:
        return sorted(_done)


def _overload_names(reg: Registration, spec: OpSpec) -> list[str]:
    name = spec.forward_op[0] if spec.forward_op else spec.name
    return [name, GRAD_PREFIX + name] if reg.fast else [name]


def _placement(p: _sharding.Placement | None) -> Any:
    from torch.distributed.tensor import Partial, Replicate, Shard

    if p is None:
        return None
    if p[0] == "shard":
        return Shard(p[1])
    if p[0] == "partial":
        return Partial("sum")
    return Replicate()


def _is_spec(v: Any) -> bool:
    """A tensor argument as ``register_sharding`` passes it (its ``DTensorSpec``: mesh, shape,
    placements, tensor meta), told apart without importing DTensor's private class."""
    return hasattr(v, "mesh") and hasattr(v, "placements") and hasattr(v, "tensor_meta")


def _strategy_fn(reg: Registration, spec: OpSpec) -> Any:
    native = reg.native
    scalar_names = [p.name for p in spec.params if not p.is_tensor]

    def accepts(dtypes: list[str | None], scalars: list[Any]) -> Any:
        def check(shapes: list[tuple[int, ...] | None]) -> bool:
            try:
                native.Signature(spec.name, shapes, dtypes, scalars)
            except (ValueError, TypeError, IndexError):
                return False
            return True

        return check

    def strategy(*args: Any, **kwargs: Any) -> list[tuple[list[Any], list[Any]]]:
        values: list[Any] = list(args)
        for p in spec.params[len(args) :]:
            values.append(kwargs.get(p.name, p.default))
        mesh = next(v.mesh for v in values if _is_spec(v))
        dtypes = [
            caller_name(v.tensor_meta.dtype) if _is_spec(v) and v.tensor_meta else None
            for p, v in zip(spec.params, values, strict=True)
            if p.is_tensor
        ]
        scalars = [v for p, v in zip(spec.params, values, strict=True) if p.name in scalar_names]
        found = _sharding.strategies(
            spec,
            _sharding.rules_of(spec),
            values,
            lambda v: tuple(v.shape) if _is_spec(v) else None,
            _sharding.devices_of(mesh.shape),
            accepts(dtypes, scalars),
        )
        return [
            (
                [_placement(p) for p in s.outputs],
                [_placement(p) for p in s.inputs[: len(args)]],
            )
            for s in found
        ]

    strategy.__name__ = f"{spec.namespace}_{spec.name}_sharding"
    return strategy


def _register_registration(reg: Registration) -> None:
    from torch.distributed.tensor import DTensor
    from torch.distributed.tensor._op_schema import RuntimeSchemaInfo
    from torch.distributed.tensor.experimental import register_sharding

    propagator = DTensor._op_dispatcher.sharding_propagator
    for spec in reg.ops.values():
        fn = _strategy_fn(reg, spec)
        scalars = [i for i, p in enumerate(spec.params) if not p.is_tensor]
        info = RuntimeSchemaInfo(
            static_argnum=scalars[0] if scalars else 100,
            static_kwargkey=[spec.params[i].name for i in scalars] or None,
            needs_pytree=True,
        )
        for name in _overload_names(reg, spec):
            qualname = f"{spec.namespace}::{name}"
            overload = getattr(getattr(torch.ops, spec.namespace), name).default
            if _done.get(qualname) is overload:
                continue
            register_sharding(overload)(fn)
            propagator.op_to_schema_info[overload] = info
            _done[qualname] = overload


def register(reg: Registration | None = None) -> None:
    """Registers the DTensor strategies of ``reg``'s ops (default: every registration so far);
    ops already registered are skipped. Imports ``torch.distributed.tensor``."""
    if not _available():
        return
    with _lock:
        for r in [reg] if reg is not None else registrations():
            _register_registration(r)


def on_registration(reg: Registration) -> None:
    """Called for each new registration: its strategies now if DTensor is already imported
    (otherwise the import hook registers them)."""
    if _DTENSOR in sys.modules and _available():
        register(reg)


def on_unregistration(reg: Registration) -> None:
    """Called when ``reg``'s kernels are removed: its ops' strategies are registered again for
    whatever takes their definitions over (a rebuilt crate's contracts)."""
    with _lock:
        for spec in reg.ops.values():
            for name in _overload_names(reg, spec):
                _done.pop(f"{spec.namespace}::{name}", None)


class _Loader(importlib.abc.Loader):
    """Runs DTensor's own loader, then registers every op's strategy."""

    def __init__(self, inner: importlib.abc.Loader) -> None:
        self.inner = inner

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)  # get_source, is_package, ... as DTensor's loader has them

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType | None:
        return self.inner.create_module(spec)

    def exec_module(self, module: ModuleType) -> None:
        self.inner.exec_module(module)
        register()


class _Hook(importlib.abc.MetaPathFinder):
    """Finds ``torch.distributed.tensor`` through the other finders and wraps its loader."""

    def find_spec(
        self, fullname: str, path: Any, target: Any = None
    ) -> importlib.machinery.ModuleSpec | None:
        if fullname != _DTENSOR:
            return None
        for finder in sys.meta_path:
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            found = finder.find_spec(fullname, path, target)
            if found is not None and found.loader is not None:
                found.loader = _Loader(found.loader)
                return found
        return None


def _available() -> bool:
    try:
        import torch.distributed
    except ImportError:
        return False
    return bool(torch.distributed.is_available())


def install() -> None:
    """Registers now if DTensor is imported, or installs the hook that registers when it is."""
    if not _available():
        return
    if _DTENSOR in sys.modules:
        register()
    elif not any(isinstance(f, _Hook) for f in sys.meta_path):
        sys.meta_path.insert(0, _Hook())

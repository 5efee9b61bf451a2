"""Registers a native module's ops in a ``torch.library`` namespace (``neuron`` by default).

Per kernel: ``define`` (schema from the manifest), the CPU kernel (the simulator), the fake
kernel (from the contract) and autograd (from the kernel's ``backward(...)`` declaration, see
:mod:`torch_nki.autograd`). A kernel with ``saved`` outputs (rmsnorm's ``rstd``) is registered as
two ops, the way ATen pairs ``layer_norm`` with ``native_layer_norm``: ``<name>_fwd`` returns
every output and carries the CPU, fake and autograd kernels; ``<name>`` is a
``CompositeImplicitAutograd`` op that calls it and returns the public outputs (a C++ kernel with
the fast library, so the public op adds no Python frame to a call).

The package's own module and every module ``torch_nki.load`` brings in go through
:func:`register`, so their ops behave the same. An op name that is already defined in the
namespace is refused before anything is registered, naming both definitions.

:func:`unregister` removes an op's kernels but keeps its definition (its schema), with a kernel
that raises :class:`~torch_nki.errors.PluginError` saying it was unloaded: handles to the op that
callers still hold (``torch.ops`` lookups, graphs ``torch.compile`` captured) point into the
dispatcher's definition, which would dangle if it were removed. Registering an op of the same
name and schema again (a rebuilt crate loaded after ``unload``) takes the kept definition over,
so those handles run the new kernels; another schema under that name is refused.

The low-level ``Library``/``define``/``impl`` path costs about half of ``custom_op`` per call.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any

import torch

from torch_nki import _fast, autograd
from torch_nki._autocast import register_autocast
from torch_nki._kernels import make_cpu_kernel, make_fake_kernel
from torch_nki._manifest import OpSpec, parse
from torch_nki.errors import PluginError

NAMESPACE = "neuron"


@dataclass
class Registration:
    """The ops one native module registered in one namespace; keeps the ``Library`` alive
    (registrations live as long as it does)."""

    native: ModuleType
    manifest_json: str
    ops: dict[str, OpSpec]
    namespace: str = NAMESPACE
    libs: list[torch.library.Library] = field(default_factory=list)
    """The libraries holding its kernels (destroyed by :func:`unregister`)."""
    fast: bool = False
    """Whether its ops have the fast C++ kernels (see :mod:`torch_nki._fast`)."""

    def op_names(self) -> list[str]:
        """Every ``torch.ops.<namespace>`` name this registration defines."""
        names = []
        for spec in self.ops.values():
            names.append(spec.name)
            if spec.forward_op is not None:
                names.append(spec.forward_op[0])
        return names


_lock = threading.Lock()
_registrations: dict[tuple[str, str], Registration] = {}


@dataclass
class _Definition:
    """An op definition (its schema) made by a registration; it outlives the registration."""

    schema: str
    owner: str
    """The module that defined it, or last registered kernels for it."""
    lib: torch.library.Library
    """The library holding the ``define`` (kept alive, never destroyed)."""
    unloaded: torch.library.Library | None = None
    """While no registration owns it: the library of its kernel that raises the unloaded error."""


_definitions: dict[str, _Definition] = {}
"""Every op this module defined, by ``ns::name``."""


def registrations() -> list[Registration]:
    """Every registration so far, the package's own first."""
    return list(_registrations.values())


def _op(namespace: str, name: str) -> Any:
    return getattr(getattr(torch.ops, namespace), name).default


def _kept_outputs(spec: OpSpec) -> list[int]:
    """The indices of an op's public (not saved) outputs among its forward op's outputs."""
    return [i for i, o in enumerate(spec.outputs) if not o.saved]


def _public_outputs(spec: OpSpec, fwd_name: str) -> Callable[..., Any]:
    """The ``CompositeImplicitAutograd`` kernel of an op with saved outputs (in Python; with the
    fast library, a C++ kernel that does the same, :func:`torch_nki._fast.register_public`)."""
    keep = _kept_outputs(spec)
    single = keep[0] if len(keep) == 1 else None
    fwd: list[Any] = []  # the op, looked up on first call (it is defined after this kernel)

    def public(*args: Any, **kwargs: Any) -> Any:
        if not fwd:
            fwd.append(_op(spec.namespace, fwd_name))
        outs = fwd[0](*args, **kwargs)
        return outs[single] if single is not None else tuple(outs[i] for i in keep)

    public.__name__ = f"{spec.namespace}_{spec.name}"
    return public


SLOW_PREFIX = "_nki_slow_"
"""Hidden twin op holding the Python CPU kernel the fast C++ kernel falls back to."""
GRAD_PREFIX = "_nki_grad_"
"""Hidden twin op holding the Python autograd kernel the fast AutogradCPU kernel defers to."""


def _twin_schema(schema: str, prefix: str) -> str:
    """The schema of a hidden twin op: the same signature under ``<prefix><name>``."""
    return prefix + schema


def _register_op(
    lib: torch.library.Library,
    define: Callable[[str], None],
    spec: OpSpec,
    ops: dict[str, OpSpec],
    native: ModuleType,
    fast: bool,
) -> None:
    ns = spec.namespace
    kernel_name, kernel_schema = spec.forward_op or (spec.name, spec.schema)
    cpu_kernel = make_cpu_kernel(spec, native)
    fake_kernel = make_fake_kernel(spec, native)
    rule = autograd.rule_for(spec, ops, lambda name: _op(ns, name))
    define(kernel_schema)
    torch.library.register_fake(f"{ns}::{kernel_name}", fake_kernel, lib=lib)
    # The Python autograd kernel serves every backend; on CPU the fast path overrides it with a
    # C++ kernel that defers to the grad twin when a gradient can be needed.
    lib.impl(
        kernel_name, autograd.make_autograd_kernel(spec, kernel_name, rule), "Autograd", with_keyset=True
    )
    if fast:
        slow, grad = SLOW_PREFIX + kernel_name, GRAD_PREFIX + kernel_name
        define(_twin_schema(kernel_schema, SLOW_PREFIX))
        lib.impl(slow, cpu_kernel, "CPU")
        define(_twin_schema(kernel_schema, GRAD_PREFIX))
        torch.library.register_fake(f"{ns}::{grad}", fake_kernel, lib=lib)
        lib.impl(grad, autograd.make_autograd_kernel(spec, grad, rule), "Autograd", with_keyset=True)
        _fast.register(f"{ns}::{kernel_name}", native, spec, ops, f"{ns}::{slow}", f"{ns}::{grad}")
    else:
        lib.impl(kernel_name, cpu_kernel, "CPU")
    register_autocast(lib, spec, kernel_name)
    if spec.forward_op is not None:
        define(spec.schema)
        if fast:
            _fast.register_public(f"{ns}::{spec.name}", f"{ns}::{kernel_name}", _kept_outputs(spec))
        else:
            lib.impl(spec.name, _public_outputs(spec, kernel_name), "CompositeImplicitAutograd")


def _defined(namespace: str, name: str) -> bool:
    return bool(torch._C._dispatch_has_kernel(f"{namespace}::{name}")) or _has_schema(namespace, name)


def _has_schema(namespace: str, name: str) -> bool:
    try:
        torch._C._get_schema(f"{namespace}::{name}", "")
    except RuntimeError:
        return False
    return True


def _check_clashes(specs: tuple[OpSpec, ...], namespace: str, source: str) -> None:
    """Refuses names already defined in ``namespace``, naming both definitions."""
    ours = {
        name: (reg, spec)
        for reg in _registrations.values()
        if reg.namespace == namespace
        for spec in reg.ops.values()
        for name in [spec.name, *(spec.forward_op[:1] if spec.forward_op else [])]
    }
    for spec in specs:
        for name in [spec.name, *(spec.forward_op[:1] if spec.forward_op else [])]:
            if name in ours:
                reg, other = ours[name]
                raise PluginError(
                    f"torch_nki: cannot register {namespace}::{name} from {source} (defined at "
                    f"{spec.location}): {namespace}::{name} is already registered by "
                    f"{reg.native.__name__} (defined at {other.location}); load it into another "
                    "namespace or rename the kernel"
                )
            kept = _definitions.get(f"{namespace}::{name}")
            if kept is not None:
                _check_kept(kept, spec, namespace, name, source)
                continue
            if _defined(namespace, name):
                raise PluginError(
                    f"torch_nki: cannot register {namespace}::{name} from {source} (defined at "
                    f"{spec.location}): torch.ops.{namespace}.{name} already exists; load it into "
                    "another namespace or rename the kernel"
                )


def _defined_schemas(spec: OpSpec, fast: bool) -> dict[str, str]:
    """Every op name registering ``spec`` defines, with its schema."""
    kernel_name, kernel_schema = spec.forward_op or (spec.name, spec.schema)
    out = {kernel_name: kernel_schema}
    if fast:
        out[SLOW_PREFIX + kernel_name] = _twin_schema(kernel_schema, SLOW_PREFIX)
        out[GRAD_PREFIX + kernel_name] = _twin_schema(kernel_schema, GRAD_PREFIX)
    if spec.forward_op is not None:
        out[spec.name] = spec.schema
    return out


def _check_kept(kept: _Definition, spec: OpSpec, namespace: str, name: str, source: str) -> None:
    """Refuses to take over a kept definition whose schema is not the new one's."""
    schema = _defined_schemas(spec, fast=False).get(name)
    if schema is not None and schema != kept.schema:
        raise PluginError(
            f"torch_nki: cannot register {namespace}::{name} from {source} (defined at "
            f"{spec.location}): {namespace}::{name} was defined by {kept.owner} as `{kept.schema}`, "
            f"and this build's schema is `{schema}`; a process cannot redefine an op that callers "
            "may still hold (torch.ops handles, compiled graphs): restart Python to use the new "
            "schema, or load the crate into another namespace"
        )


def _unloaded_kernel(qualname: str, owner: str) -> Callable[..., Any]:
    def unloaded(*args: Any, **kwargs: Any) -> Any:
        raise PluginError(
            f"{qualname} was unloaded (torch_nki.plugins.unload of {owner}); load its crate again "
            "with torch_nki.load to call it"
        )

    return unloaded


def _take_over(qualname: str, schema: str, owner: str, tags: tuple[Any, ...], namespace: str) -> None:
    """Defines ``qualname``, or takes over the definition kept since its registration was removed."""
    kept = _definitions.get(qualname)
    if kept is None:
        defs = torch.library.Library(namespace, "FRAGMENT")
        defs.define(schema, tags=tags)
        _definitions[qualname] = _Definition(schema, owner, defs)
        return
    if kept.schema != schema:  # a twin whose op's schema was checked: cannot differ
        raise PluginError(f"torch_nki: {qualname} was defined as `{kept.schema}`, not `{schema}`")
    if kept.unloaded is not None:
        kept.unloaded._destroy()
        kept.unloaded = None
    kept.owner = owner


def register(native: ModuleType, namespace: str = NAMESPACE, source: str | None = None) -> Registration:
    """Registers every op of ``native`` (a torch-nki native module) in ``torch.ops.<namespace>``
    once; registering the same module in the same namespace again returns the first
    registration."""
    with _lock:
        key = (native.__name__, namespace)
        done = _registrations.get(key)
        if done is not None:
            return done
        text = native.manifest()
        specs = parse(text, namespace)
        _check_clashes(specs, namespace, source or native.__name__)
        native.set_namespace(namespace)
        by_name = {s.name: s for s in specs}
        lib = torch.library.Library(namespace, "FRAGMENT")
        fast = hasattr(native, "_fast_api") and _fast.load()
        tags = (torch.Tag.pt2_compliant_tag,)

        def define(schema: str) -> None:
            name = schema.split("(", 1)[0]
            _take_over(f"{namespace}::{name}", schema, native.__name__, tags, namespace)

        for spec in specs:
            try:
                _register_op(lib, define, spec, by_name, native, fast)
            except Exception as err:
                raise RuntimeError(
                    f"torch_nki: could not register {spec.qualname} (defined at {spec.location}): {err}"
                ) from err
        reg = Registration(native, text, by_name, namespace, [lib], fast)
        _registrations[key] = reg
    from torch_nki import distributed

    distributed.on_registration(reg)
    return reg


def unregister(reg: Registration) -> None:
    """Removes the kernels of every op ``reg`` registered; calling one of its ops then raises
    :class:`~torch_nki.errors.PluginError` saying it was unloaded, until a registration of the
    same name and schema takes it over (see the module documentation). Graphs
    ``torch.compile`` captured are dropped (``torch._dynamo.reset()``): they were traced with
    the old kernels' fake kernels."""
    with _lock:
        if reg.fast:
            for spec in reg.ops.values():
                _fast.unregister(f"{reg.namespace}::{spec.name}")
                if spec.forward_op:
                    _fast.unregister(f"{reg.namespace}::{spec.forward_op[0]}")
        for lib in reg.libs:
            lib._destroy()
        reg.libs.clear()
        owner = reg.native.__name__
        for spec in reg.ops.values():
            for name in _defined_schemas(spec, reg.fast):
                qualname = f"{reg.namespace}::{name}"
                kept = _definitions.get(qualname)
                if kept is None or kept.unloaded is not None:
                    continue
                stub = torch.library.Library(reg.namespace, "FRAGMENT")
                stub.impl(name, _unloaded_kernel(qualname, owner), "CompositeImplicitAutograd")
                kept.unloaded = stub
        _registrations.pop((owner, reg.namespace), None)
    from torch_nki import distributed

    distributed.on_unregistration(reg)
    dynamo = sys.modules.get("torch._dynamo")
    if dynamo is not None:
        dynamo.reset()

"""Registers a native module's ops in the ``neuron`` namespace of ``torch.library``.

Per op: ``define`` (schema from the manifest), the CPU kernel (the simulator), the fake kernel
(from the contract) and, when :data:`torch_nki.autograd.RULES` has one, the autograd formula.
The low-level ``Library``/``define``/``impl`` path costs about half of ``custom_op`` per call.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from types import ModuleType

import torch

from torch_nki import autograd
from torch_nki._contract import ContractEval
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


def _register_op(lib: torch.library.Library, spec: OpSpec, native: ModuleType) -> None:
    contract = ContractEval(spec)
    lib.define(spec.schema, tags=(torch.Tag.pt2_compliant_tag,))
    lib.impl(spec.name, make_cpu_kernel(spec, native, contract), "CPU")
    torch.library.register_fake(spec.qualname, make_fake_kernel(spec, native, contract), lib=lib)
    rule = autograd.RULES.get(spec.name)
    if rule is not None:
        torch.library.register_autograd(
            spec.qualname, rule.backward, setup_context=rule.setup_context, lib=lib
        )


def register(native: ModuleType) -> Registration:
    """Registers every op of ``native`` (a module with ``manifest``/``check``/``run``) once."""
    with _lock:
        done = _registrations.get(native.__name__)
        if done is not None:
            return done
        text = native.manifest()
        specs = parse(text)
        lib = torch.library.Library(NAMESPACE, "FRAGMENT")
        for spec in specs:
            try:
                _register_op(lib, spec, native)
            except Exception as err:
                raise RuntimeError(
                    f"torch_nki: could not register {spec.qualname} (defined at {spec.location}): {err}"
                ) from err
        reg = Registration(native, text, {s.name: s for s in specs}, [lib])
        _registrations[native.__name__] = reg
        return reg

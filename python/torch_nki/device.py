"""``torch_nki.device``: the ops on the ``neuron`` device (PyTorch's ``PrivateUse1`` key), run
as the NKI Python that ``torch_nki.emit`` generates, through ``nki.jit``.

When the real ``nki`` package and a Neuron PyTorch backend (``torch_neuronx``) are importable,
``import torch_nki`` calls :func:`enable`, and every ``torch.ops.neuron.<op>`` called on
``neuron`` tensors runs on the device. Without them nothing is registered and nothing changes.

Per call signature (op, input shapes and dtypes, scalar constants, target) the generated source
is loaded once with ``import nki`` bound to the NKI module given, and its ``@nki.jit`` function
is kept; later calls with that signature call it directly. Scalars are compile-time constants
in the generated source, so the kernel is called with the tensors only, as NKI expects.

``NeuronDevice(torch_nki.nki)`` runs the same glue on the frontend (the simulator) instead of
the device: that is how it is tested where no Trainium is reachable.
"""

from __future__ import annotations

import importlib
import importlib.util
import math
import os
import threading
from collections.abc import Callable, Hashable
from dataclasses import dataclass
from typing import Any

import torch

import torch_nki
from torch_nki._dtypes import INDEX_DOWNCAST, narrow_indices
from torch_nki._manifest import OpSpec

__all__ = ["CompiledKernel", "NeuronDevice", "available", "enable"]

DISPATCH_KEY = "PrivateUse1"


@dataclass(frozen=True)
class CompiledKernel:
    """One signature's generated source and the ``@nki.jit`` function loaded from it (launched
    on the source's ``LAUNCH_GRID`` when it sets one)."""

    op: str
    source: str
    function: Callable[..., Any]


def _scalar_key(value: Any) -> Hashable:
    """Scalars as cache keys, canonical as the native signature makes them (the source they
    generate is the same): every NaN is one key, and ``0.0`` and ``-0.0`` are one (they compare
    and hash equal)."""
    if isinstance(value, float) and math.isnan(value):
        return ("float", "nan")
    return (type(value).__name__, value)


class NeuronDevice:
    """The ``PrivateUse1`` implementations of every op, running generated NKI through
    ``nki_module`` (the real ``nki`` package on a Trainium host)."""

    def __init__(self, nki_module: Any, target: str | None = None) -> None:
        self.nki = nki_module
        self.target = target or os.environ.get("TORCH_NKI_TARGET", "trn2")
        self._kernels: dict[Hashable, CompiledKernel] = {}
        self._lock = threading.Lock()
        self._libs: list[torch.library.Library] = []

    def compiled(self) -> list[CompiledKernel]:
        """Every kernel loaded so far, in load order."""
        return list(self._kernels.values())

    def kernel(self, op: str, args: tuple[Any, ...]) -> CompiledKernel:
        """The kernel for calling ``op`` on ``args``, generated and loaded on first use."""
        sig = torch_nki.kernel(op).signature(*args)
        key = (
            op,
            self.target,
            tuple(sig.shapes),
            tuple(sig.dtypes),
            tuple(_scalar_key(s) for s in sig.scalars),
        )
        with self._lock:
            found = self._kernels.get(key)
        if found is not None:
            return found
        source = sig.emit(self.target)
        from torch_nki.nki import launchable, load_source

        module = load_source(source, op, nki_module=self.nki)
        compiled = CompiledKernel(op, source, launchable(module, op))
        with self._lock:
            return self._kernels.setdefault(key, compiled)

    def implementation(self, op: str) -> Callable[..., Any]:
        """The ``PrivateUse1`` kernel of ``op``: every output the kernel writes, as the CPU
        kernel of the same registered op returns them."""
        spec: OpSpec = torch_nki._registration().ops[op]

        def neuron_kernel(*args: Any) -> Any:
            compiled = self.kernel(op, args)
            # The kernel takes index inputs as int32, as the CPU kernel does.
            tensors = [
                narrow_indices(op, p.name, a) if a.dtype in INDEX_DOWNCAST else a
                for p, a in zip(spec.params, args, strict=False)
                if isinstance(a, torch.Tensor)
            ]
            return compiled.function(*tensors)

        neuron_kernel.__name__ = f"neuron_{spec.name}_device"
        return neuron_kernel

    def register(self) -> None:
        """Registers :meth:`implementation` for every op under ``PrivateUse1`` (once)."""
        with self._lock:
            if self._libs:
                return
            lib = torch.library.Library("neuron", "IMPL")
            for name, spec in torch_nki._registration().ops.items():
                kernel_name = spec.forward_op[0] if spec.forward_op else name
                lib.impl(kernel_name, self.implementation(name), DISPATCH_KEY)
            self._libs.append(lib)

    def unregister(self) -> None:
        """Removes the registrations :meth:`register` made."""
        with self._lock:
            for lib in self._libs:
                lib._destroy()
            self._libs.clear()


def available() -> bool:
    """Whether the ``nki`` package and a Neuron PyTorch backend are importable."""
    return all(importlib.util.find_spec(m) is not None for m in ("nki", "torch_neuronx"))


_ENABLED: list[NeuronDevice] = []


def enable(nki_module: Any = None, target: str | None = None) -> NeuronDevice:
    """Registers the ``neuron`` device implementations (with the real ``nki`` by default);
    returns the :class:`NeuronDevice`. Calling it again returns the first one."""
    if _ENABLED:
        return _ENABLED[0]
    device = NeuronDevice(nki_module or importlib.import_module("nki"), target)
    device.register()
    _ENABLED.append(device)
    return device

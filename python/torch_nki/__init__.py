"""torch-nki: NKI kernels written in Rust, usable from PyTorch as ``torch.ops.neuron.<name>``.

Importing this package (or just ``import torch`` once it is installed: it registers a
``torch.backends`` entry point) registers every kernel of the native registry in the ``neuron``
namespace, with a CPU kernel (the NKI simulator, zero copy, GIL released), a fake kernel computed
from the kernel's shape/dtype contract (so ``torch.compile(fullgraph=True)`` works, with dynamic
shapes) and autograd generated from the kernel's declared backward kernel::

    import torch, torch_nki
    y = torch.ops.neuron.rmsnorm(x, weight, 1e-6)

Contract violations raise :class:`ContractShapeError` (a ``ValueError``) or
:class:`ContractDtypeError` (a ``TypeError``) naming the op, the argument and what the contract
expected, and an index input out of range raises :class:`ContractIndexError` (an ``IndexError``);
every error is a :class:`NkiError` (see :mod:`torch_nki.errors`).
"""

# First, before anything imports torch: torch's autoload may find this package half-imported and
# still needs the entry point (`torch_nki:_autoload`) to exist.
from torch_nki._entry import _autoload, report_autoload_failure, torch_is_initialising  # noqa: F401

# isort: split
import json
import os
from typing import Any

from torch_nki._cost import CostReport, cost
from torch_nki._emit import emit
from torch_nki._signature import Kernel, Signature, kernel
from torch_nki.errors import (
    ContractDtypeError,
    ContractError,
    ContractIndexError,
    ContractShapeError,
    NkiError,
    NoBackwardError,
    PluginError,
    UnknownOpError,
    UnsupportedTransformError,
    ValidationError,
)

__version__ = "0.1.0"
__all__ = [
    "Adapter",
    "ContractDtypeError",
    "ContractError",
    "ContractIndexError",
    "ContractShapeError",
    "CostReport",
    "HotspotReport",
    "Kernel",
    "NkiError",
    "NoBackwardError",
    "Pattern",
    "PluginError",
    "Signature",
    "SwapReport",
    "UnknownOpError",
    "UnsupportedTransformError",
    "ValidationError",
    "__version__",
    "cache_capacity",
    "cache_size",
    "cost",
    "emit",
    "kernel",
    "load",
    "manifest",
    "ops",
    "profile",
    "register_adapter",
    "register_pattern",
    "sharding",
    "swap",
    "swapped",
    "unregister_adapter",
    "unregister_pattern",
    "unswap",
]

_LOAD_ERROR: BaseException | None = None


try:
    from torch_nki import _native
    from torch_nki._register import Registration, register

    _REGISTRATION: Registration = register(_native)
    from torch_nki import device as _device
    from torch_nki.plugins import load_from_environment

    if _device.available():
        _device.enable()
    load_from_environment()
    from torch_nki import distributed as _distributed

    _distributed.install()
except Exception as _err:  # a broken install or a name clash in the neuron namespace
    if not torch_is_initialising():
        raise
    _LOAD_ERROR = _err
    report_autoload_failure(_err)


def _registration() -> "Registration":
    if _LOAD_ERROR is not None:
        raise ImportError(f"torch_nki failed to load: {_LOAD_ERROR}") from _LOAD_ERROR
    return _REGISTRATION


def ops() -> list[str]:
    """Names of the registered kernels, backward kernels included, sorted: ``name`` for
    ``torch.ops.neuron.<name>`` (the package's and those loaded into ``neuron``), ``ns::name``
    for kernels :func:`load` registered in another namespace. A kernel with ``saved`` outputs
    also has ``torch.ops.<ns>.<name>_fwd``."""
    from torch_nki._register import registrations

    _registration()
    names = []
    for reg in registrations():
        prefix = "" if reg.namespace == "neuron" else f"{reg.namespace}::"
        names += [prefix + name for name in reg.ops]
    return sorted(names)


def load(path: str | os.PathLike[str], namespace: str = "neuron") -> Any:
    """Loads the kernels of an out-of-tree crate (its built library, or the crate directory,
    built with cargo) as ``torch.ops.<namespace>.<name>``; see :mod:`torch_nki.plugins`."""
    _registration()
    from torch_nki.plugins import load as load_module

    return load_module(path, namespace)


def manifest() -> dict[str, Any]:
    """The registry manifest: for every op its schema, contract, docs, replaces and location."""
    result: dict[str, Any] = json.loads(_registration().manifest_json)
    return result


def cache_size() -> int:
    """Number of kernel programs in the compile cache (compiled once per signature: traced,
    validated and planned)."""
    _registration()
    return int(_native.cache_size())


def cache_capacity(capacity: int | None = None) -> int:
    """The most programs the compile cache holds (default 1024, or
    ``$TORCH_NKI_COMPILE_CACHE_SIZE``); with ``capacity``, sets it first. When full, the least
    recently used programs are evicted, so memory stays bounded however many distinct
    signatures (shapes, dtypes, scalars) a process calls. A capacity that is not a whole
    number of at least 1 is a ``ValueError`` (a ``TypeError`` for a non-integer)."""
    _registration()
    if capacity is not None:
        if isinstance(capacity, bool) or not isinstance(capacity, int):
            raise TypeError(
                f"torch_nki.cache_capacity: capacity must be an int, got {type(capacity).__name__}"
            )
        if not 1 <= capacity < 2**63:
            raise ValueError(
                f"torch_nki.cache_capacity: capacity must be at least 1 and below 2**63, got {capacity}"
            )
    return int(_native.cache_capacity(capacity))


#: Names served lazily from submodules (the profiling and swapping workflow imports the
#: profiler and dispatch machinery only when used; extending it, ``torch.fx``).
_LAZY = {
    "profile": "torch_nki.hotspots",
    "HotspotReport": "torch_nki.hotspots",
    "swap": "torch_nki.swapping",
    "unswap": "torch_nki.swapping",
    "swapped": "torch_nki.swapping",
    "SwapReport": "torch_nki.swapping",
    "Adapter": "torch_nki.adapters",
    "register_adapter": "torch_nki.adapters",
    "unregister_adapter": "torch_nki.adapters",
    "Pattern": "torch_nki.compiler",
    "register_pattern": "torch_nki.compiler",
    "unregister_pattern": "torch_nki.compiler",
    "sharding": "torch_nki._sharding",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'torch_nki' has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(module), name)

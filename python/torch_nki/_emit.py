"""``torch_nki.emit(op, *args, target=...)``: the NKI Python source of an op for one signature.

The kernel is compiled for the arguments' shapes and dtypes on the chosen target, exactly as a
call would be (traced and validated), and its program is written out as an ``@nki.jit`` function
for the ``nki`` package (NKI 0.3-0.6, Neuron SDK 2.29-2.32): outputs in ``nl.shared_hbm``, tiles
in ``nl.sbuf``/``nl.psum``, loops kept as ``nl.affine_range``/``nl.sequential_range``, one
``nisa.*`` call per instruction, each line commented with the Rust source line it came from.
Tensors are only looked at for their shape and dtype, so ``meta`` tensors work. Sources are
kept in the persistent cache (``torch_nki.source_cache``).

    >>> source = torch_nki.emit("rmsnorm", torch.empty(300, 1000, dtype=torch.bfloat16, device="meta"),
    ...                         torch.empty(1000, dtype=torch.bfloat16, device="meta"))
"""

from __future__ import annotations

import warnings
from typing import Any

__all__ = ["emit"]

_REPORTED: set[str] = set()
"""Cache entries already reported as rebuilt in this process (each is reported once)."""


def emit(op: str, *args: Any, target: str = "trn2", **kwargs: Any) -> str:
    """NKI Python source of ``torch.ops.neuron.<op>(*args, **kwargs)`` compiled for ``target``
    (``ns::name`` for an op of a kernel crate loaded into another namespace):
    ``torch_nki.kernel(op).signature(*args, **kwargs).emit(target)``."""
    from torch_nki._signature import kernel

    return kernel(op).signature(*args, **kwargs).emit(target)


def warn_status(status: str) -> None:
    """Warns (once per process and entry) when the persistent cache entry was rebuilt or the
    cache could not be used; ``status`` is the native ``Signature.emit``'s."""
    if status in _REPORTED:
        return
    if status.startswith("rebuilt "):
        message = f"torch_nki: NKI source cache entry {status.removeprefix('rebuilt ')}; rebuilt it"
    elif status.startswith("uncached "):
        message = f"torch_nki: NKI source cache at {status.removeprefix('uncached ')}; not caching"
    else:
        return
    _REPORTED.add(status)
    warnings.warn(message, RuntimeWarning, stacklevel=3)

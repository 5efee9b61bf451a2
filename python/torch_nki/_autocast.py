"""``torch.autocast`` for the ops, from each kernel's declared ``autocast(...)`` policy.

torch's own autocast sorts ops by kind: matmul-like ops run in the autocast dtype, precision
sensitive ones in f32, and ops taking several tensors promote mixed inputs. A kernel declares its
kind (``lower``, ``fp32``, ``promote``; ``keep`` is the default and registers nothing, so autocast
passes through), and the op gets an ``AutocastCPU`` kernel that casts its floating-point inputs
and calls it again with autocast excluded, as ``torch.library.register_autocast`` does, but with
the cast dtype chosen per call (the current autocast dtype, or the widest input).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from torch_nki._manifest import OpSpec

_KEY = "AutocastCPU"


def _target_dtype(policy: str, args: tuple[Any, ...]) -> torch.dtype | None:
    if policy == "lower":
        return torch.get_autocast_dtype("cpu")
    if policy == "fp32":
        return torch.float32
    floats = [a.dtype for a in args if isinstance(a, torch.Tensor) and a.is_floating_point()]
    if not floats:
        return None
    widest = floats[0]
    for d in floats[1:]:
        widest = torch.promote_types(widest, d)
    return widest


def register_autocast(lib: torch.library.Library, spec: OpSpec, op_name: str) -> None:
    """Registers the ``AutocastCPU`` kernel of ``op_name`` (computing kernel ``spec``) for its
    declared policy; nothing for ``keep``."""
    policy = spec.autocast
    if policy == "keep":
        return
    key = getattr(torch._C.DispatchKey, _KEY)
    op: Any = None

    def run(*args: Any) -> Any:
        nonlocal op
        if op is None:
            op = getattr(getattr(torch.ops, spec.namespace), op_name).default
        dtype = _target_dtype(policy, args)
        if dtype is not None:
            args = tuple(
                a.to(dtype)
                if isinstance(a, torch.Tensor) and a.is_floating_point() and a.dtype != dtype
                else a
                for a in args
            )
        with torch._C._ExcludeDispatchKeyGuard(torch._C.DispatchKeySet(key)):
            return op(*args)

    kernel: Callable[..., Any] = lambda _keyset, *args: run(*args)  # noqa: E731
    lib.impl(op_name, kernel, _KEY, with_keyset=True)
    # The Python dispatcher (torch.compile's tracing) looks up Python kernels by key.
    packet = getattr(getattr(torch.ops, spec.namespace), op_name).default
    if packet.has_kernel_for_dispatch_key(key) and key in packet.py_kernels:
        packet.py_kernels.pop(key)
    packet.py_impl(key)(run)

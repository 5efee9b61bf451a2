"""torch dtypes ↔ the kernel dtype names (``f32``, ``bf16``, ...), and the float64 policy.

The table is Rust's (``DType`` and ``HOST_DTYPES`` in the contract crate), read from the
manifest's ``dtypes`` and ``host_dtypes``: every other module takes its dtype spellings from here,
so a dtype added in Rust reaches Python without an edit.
"""

from __future__ import annotations

import json
import os
import sys
import threading
import warnings
from dataclasses import dataclass
from types import FrameType
from typing import Any

import torch

from torch_nki.errors import ContractIndexError

TorchDType = torch.dtype
"""``torch.dtype``, named so the tables' ``torch`` fields do not shadow the module in annotations."""


@dataclass(frozen=True)
class KernelDType:
    """One element type kernels take, with its names."""

    name: str
    """The kernel name (``bf16``): contracts, messages, the native functions."""
    nki: str
    """The NKI name without ``nl.`` (``bfloat16``)."""
    torch_name: str | None
    """The torch name without ``torch.`` (``bfloat16``); ``None`` where torch has no such dtype
    (``float8_e4m3``, ``tfloat32``: kernel-internal, never at the torch boundary)."""
    torch: TorchDType | None
    """The torch dtype (``torch.bfloat16``), or ``None``."""
    is_float: bool
    """A floating-point type."""
    itemsize: int
    """Bytes per element."""


@dataclass(frozen=True)
class HostDType:
    """A torch dtype no kernel takes that is computed in a narrower kernel dtype (``float64`` in
    ``float32``, ``int64`` indices in ``int32``)."""

    name: str
    """The name the native contract check takes (``f64``)."""
    torch: TorchDType
    compute: TorchDType
    """The kernel dtype it is computed in."""


def _torch_dtype(name: str) -> torch.dtype:
    dtype = getattr(torch, name, None)
    if not isinstance(dtype, torch.dtype):
        raise ImportError(f"torch_nki: this torch ({torch.__version__}) has no dtype torch.{name}")
    return dtype


def _load(doc: dict[str, Any]) -> tuple[tuple[KernelDType, ...], tuple[HostDType, ...]]:
    kernel = tuple(
        KernelDType(
            d["name"],
            d["nki"].removeprefix("nl."),
            d["torch"],
            None if d["torch"] is None else _torch_dtype(d["torch"]),
            d["float"],
            d["bytes"],
        )
        for d in doc["dtypes"]
    )
    by_name = {d.name: d.torch for d in kernel if d.torch is not None}
    host = tuple(
        HostDType(h["name"], _torch_dtype(h["torch"]), by_name[h["compute"]]) for h in doc["host_dtypes"]
    )
    return kernel, host


def _manifest() -> dict[str, Any]:
    from torch_nki import _native

    doc: dict[str, Any] = json.loads(_native.manifest())
    return doc


_KERNEL, _HOST = _load(_manifest())

#: Every kernel dtype, in Rust's ``DType::ALL`` order.
KERNEL_DTYPES: tuple[KernelDType, ...] = _KERNEL

#: Host dtypes computed in a narrower kernel dtype (Rust's ``HOST_DTYPES``).
HOST_DTYPES: tuple[HostDType, ...] = _HOST

#: torch dtypes a kernel can take, by their kernel dtype name.
TORCH_TO_NKI: dict[torch.dtype, str] = {d.torch: d.name for d in KERNEL_DTYPES if d.torch is not None}

#: The inverse of :data:`TORCH_TO_NKI`.
NKI_TO_TORCH: dict[str, torch.dtype] = {d.name: d.torch for d in KERNEL_DTYPES if d.torch is not None}

#: Dtypes computed in a narrower dtype and cast back (as on TorchNeuron): float64 runs as float32.
DOWNCAST: dict[torch.dtype, torch.dtype] = {
    h.torch: h.compute for h in HOST_DTYPES if h.torch.is_floating_point
}

#: Index dtypes a kernel takes in a narrower dtype: int64 (torch's class targets) runs as int32
#: after a range check (:func:`narrow_indices`); nothing is cast back.
INDEX_DOWNCAST: dict[torch.dtype, torch.dtype] = {
    h.torch: h.compute for h in HOST_DTYPES if not h.torch.is_floating_point
}

#: Output dtype names the native check returns (kernel names, and ``f64`` for the ``f32``
#: outputs of a call with float64 inputs) → torch dtypes.
RETURNED: dict[str, torch.dtype] = {
    **NKI_TO_TORCH,
    **{h.name: h.torch for h in HOST_DTYPES if h.torch.is_floating_point},
}

#: torch dtypes the native check takes by a name other than torch's: kernel dtypes and float
#: host dtypes (whose outputs come back under that name).
_CALLER_NAMES: dict[torch.dtype, str] = {
    **TORCH_TO_NKI,
    **{h.torch: h.name for h in HOST_DTYPES if h.torch.is_floating_point},
}

_warned: set[str] = set()
_warned_lock = threading.Lock()


def torch_name(dtype: torch.dtype) -> str:
    """``torch.int32`` → ``int32``."""
    return str(dtype).removeprefix("torch.")


def caller_name(dtype: torch.dtype) -> str:
    """The name the native contract check takes for a torch dtype: a kernel dtype (``bf16``),
    ``f64`` (computed in f32), or torch's own name otherwise (``int64``, computed in i32; ``bool``,
    which no kernel takes)."""
    return _CALLER_NAMES.get(dtype) or torch_name(dtype)


def narrow_indices(op: str, param: str, t: torch.Tensor) -> torch.Tensor:
    """An int64 index tensor as the int32 the kernel takes; a value int32 cannot hold raises
    :class:`~torch_nki.errors.ContractIndexError` naming the op, the argument and the value."""
    narrow = INDEX_DOWNCAST[t.dtype]
    if t.numel():
        info = torch.iinfo(narrow)
        lo, hi = (int(v) for v in t.aminmax())
        bad = lo if lo < info.min else hi if hi > info.max else None
        if bad is not None:
            err = ContractIndexError(
                f"neuron::{op}: {param} holds {bad}, which does not fit the kernel's int32 "
                f"(int64 inputs are computed in int32: [{info.min}, {info.max}])"
            )
            err.op, err.param = op, param
            raise err
    return t.to(narrow)


def warn_downcast(op: str, dtype: torch.dtype) -> None:
    """Warns once per op and dtype that inputs of ``dtype`` are computed in a narrower dtype."""
    key = f"{op}:{dtype}"
    with _warned_lock:
        if key in _warned:
            return
        _warned.add(key)
    narrow = torch_name(DOWNCAST[dtype])
    warnings.warn(
        f"neuron::{op}: {torch_name(dtype)} inputs are computed in {narrow} "
        f"(as on TorchNeuron); results are returned as {torch_name(dtype)}",
        UserWarning,
        stacklevel=_caller_stacklevel(),
    )


def _caller_stacklevel() -> int:
    """The ``stacklevel`` that points a warning at the first frame outside torch and torch_nki."""
    internal = (os.path.dirname(torch.__file__), os.path.dirname(__file__))
    frame: FrameType | None = sys._getframe(1)
    level = 1
    while frame is not None and frame.f_code.co_filename.startswith(internal):
        frame, level = frame.f_back, level + 1
    return level


def reset_warnings() -> None:
    """Forgets which downcast warnings were shown (for tests)."""
    with _warned_lock:
        _warned.clear()

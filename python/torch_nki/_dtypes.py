"""torch dtypes ↔ the kernel dtype names (``f32``, ``bf16``, ...), and the float64 policy."""

from __future__ import annotations

import os
import sys
import threading
import warnings
from types import FrameType

import torch

from torch_nki.errors import ContractIndexError

#: torch dtypes a kernel can take, by their kernel dtype name.
TORCH_TO_NKI: dict[torch.dtype, str] = {
    torch.float32: "f32",
    torch.bfloat16: "bf16",
    torch.float16: "f16",
    torch.float8_e4m3fn: "f8e4m3",
    torch.float8_e5m2: "f8e5m2",
    torch.int32: "i32",
}

#: The inverse of :data:`TORCH_TO_NKI`.
NKI_TO_TORCH: dict[str, torch.dtype] = {v: k for k, v in TORCH_TO_NKI.items()}

#: Dtypes computed in a narrower dtype and cast back (as on TorchNeuron): float64 runs as float32.
DOWNCAST: dict[torch.dtype, torch.dtype] = {torch.float64: torch.float32}

#: Index dtypes a kernel takes in a narrower dtype: int64 (torch's class targets) runs as int32
#: after a range check (:func:`narrow_indices`); nothing is cast back.
INDEX_DOWNCAST: dict[torch.dtype, torch.dtype] = {torch.int64: torch.int32}

_warned: set[str] = set()
_warned_lock = threading.Lock()


def torch_name(dtype: torch.dtype) -> str:
    """``torch.int32`` → ``int32``."""
    return str(dtype).removeprefix("torch.")


def caller_name(dtype: torch.dtype) -> str:
    """The name the native contract check takes for a torch dtype: a kernel dtype (``bf16``),
    ``f64`` (computed in f32), or torch's own name otherwise (``int64``, computed in i32; ``bool``,
    which no kernel takes)."""
    name = TORCH_TO_NKI.get(dtype)
    if name is not None:
        return name
    return "f64" if dtype == torch.float64 else torch_name(dtype)


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

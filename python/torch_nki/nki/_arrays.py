"""Host arrays in and out of the simulator: NumPy arrays and torch tensors as little-endian
bytes of an NKI dtype, and back."""

from __future__ import annotations

from typing import Any

from torch_nki._dtypes import KERNEL_DTYPES, NKI_TO_TORCH
from torch_nki.nki._values import DType
from torch_nki.nki.language import as_dtype


def is_array(value: Any) -> bool:
    """A NumPy array or a torch tensor (the arguments a kernel traces as HBM tensors)."""
    module = type(value).__module__
    return (module.startswith("numpy") and hasattr(value, "dtype")) or module.startswith("torch")


def is_torch(value: Any) -> bool:
    return type(value).__module__.startswith("torch")


def spec(value: Any) -> tuple[list[int], DType]:
    """Shape and NKI dtype of an array."""
    return [int(s) for s in value.shape], as_dtype(value.dtype)


def to_bytes(value: Any) -> bytes:
    """The array's elements, row-major, little-endian."""
    if is_torch(value):
        import torch

        # As raw bytes, so dtypes NumPy lacks (bfloat16, fp8) come through too.
        t = value.detach().to("cpu").contiguous().reshape(-1)
        return bytes(t.view(torch.uint8).numpy().tobytes())
    import numpy as np

    return bytes(np.ascontiguousarray(value).tobytes())


def from_bytes(data: bytes, shape: list[int], dtype: str, like_torch: bool) -> Any:
    """An array of ``shape`` and simulator dtype ``dtype`` holding ``data``."""
    import numpy as np

    if like_torch:
        import torch

        if dtype not in NKI_TO_TORCH:
            raise TypeError(f"torch_nki.nki: outputs of dtype {dtype} have no torch equivalent")
        raw = torch.frombuffer(bytearray(data), dtype=torch.uint8)
        return raw.view(NKI_TO_TORCH[dtype]).reshape(shape)
    # NumPy has the IEEE types, the integers and bool (no bfloat16, no fp8), by torch's names.
    numpy_dtypes = {d.name: np.dtype(name) for d in KERNEL_DTYPES if hasattr(np, name := d.torch_name or "")}
    if dtype not in numpy_dtypes:
        raise TypeError(
            f"torch_nki.nki: an output is {dtype}, which NumPy cannot hold; pass torch tensors to get it"
        )
    return np.frombuffer(data, dtype=numpy_dtypes[dtype]).reshape(shape).copy()

"""Host arrays in and out of the simulator: NumPy arrays and torch tensors as little-endian
bytes of an NKI dtype, and back.

The packed MX dtypes (``nl.float8_e4m3fn_x4``, ...) exist in neither NumPy nor torch. As NKI's
MX tutorial does, host code holds their bytes in an integer array (uint8, or one 32-bit /
16-bit word per element): an input is passed as :func:`packed` ``(array, dtype)``, an output
comes back as uint8 bytes (the last dimension times the element size: 4 for the fp8 types, 2
for fp4). Lane ``k`` of an element is byte ``k`` (fp8) or nibble ``k`` (fp4), low first."""

from __future__ import annotations

from typing import Any

from torch_nki._dtypes import KERNEL_DTYPES, NKI_TO_TORCH
from torch_nki.nki._values import DType
from torch_nki.nki.language import DTYPES, PACKED_DTYPES, as_dtype

_SIZES = {d.name: d.itemsize for d in KERNEL_DTYPES}
_PACKED = {d: _SIZES[d.native] for d in PACKED_DTYPES}
"""Bytes per element of each packed MX dtype."""
_PACKED_NATIVE = {d.native: size for d, size in _PACKED.items()}
_BY_NATIVE = {d.native: d for d in DTYPES}
_INTEGER_TYPES = {"uint8", "int8", "uint16", "int16", "uint32", "int32", "int64", "uint64"}


class Packed:
    """Host bytes of a packed MX tensor: ``data`` (an integer NumPy array or torch tensor)
    read as elements of ``dtype``, the last dimension shrunk by the element size over
    ``data``'s item size."""

    def __init__(self, data: Any, dtype: DType) -> None:
        if dtype not in _PACKED:
            raise TypeError(f"torch_nki.nki.packed: {dtype!r} is not a packed MX dtype ({list(_PACKED)})")
        if not is_array(data) or isinstance(data, Packed):
            raise TypeError(f"torch_nki.nki.packed: expected a NumPy array or torch tensor, got {data!r}")
        if str(data.dtype).removeprefix("torch.") not in _INTEGER_TYPES:
            raise TypeError(
                f"torch_nki.nki.packed: the bytes of {dtype!r} come in an integer array, got {data.dtype}"
            )
        itemsize = int(data.element_size() if is_torch(data) else data.itemsize)
        shape = [int(s) for s in data.shape]
        size = _PACKED[dtype]
        if not shape or shape[-1] * itemsize % size:
            raise ValueError(
                f"torch_nki.nki.packed: a {tuple(shape)} array of {itemsize}-byte items does not "
                f"hold whole {size}-byte {dtype!r} elements in its last dimension"
            )
        self.data = data
        self.dtype = dtype
        self.shape = (*shape[:-1], shape[-1] * itemsize // size)

    def __repr__(self) -> str:
        return f"packed({self.shape}, {self.dtype!r})"


def packed(data: Any, dtype: DType) -> Packed:
    """``torch_nki.nki.packed(array, nl.float8_e4m3fn_x4)``: passes ``array``'s bytes to a
    kernel as an HBM tensor of the packed MX dtype (a uint8 ``[P, 4F]`` array is an fp8
    ``[P, F]`` tensor, a uint8 ``[P, 2F]`` one an fp4 ``[P, F]``)."""
    return Packed(data, dtype)


def numpy_dtype(dtype: DType) -> Any:
    """The NumPy dtype of ``dtype``'s host arrays: NumPy's own type of the same name (the IEEE
    floats, the integers, ``bool_``), else ml_dtypes' (``bfloat16`` and the fp8 formats, which
    use the same encodings: see the dtype table in docs/nki-coverage.md). Two have neither:
    ``tfloat32`` is held as ``float32`` (its storage), and a packed MX type as one unsigned
    word per element (``uint32`` for the fp8 ``_x4`` types, ``uint16`` for fp4), the layout
    :func:`packed` reads."""
    import numpy as np

    name = dtype.nki_name
    if dtype in PACKED_DTYPES:
        return np.dtype(f"uint{8 * _PACKED[dtype]}")
    if name == "tfloat32":
        return np.dtype(np.float32)
    if hasattr(np, name):
        return np.dtype(getattr(np, name))
    try:
        import ml_dtypes
    except ImportError:
        raise TypeError(
            f"torch_nki.nki: NumPy arrays of {dtype!r} need the ml_dtypes package (pip install ml_dtypes)"
        ) from None
    return np.dtype(getattr(ml_dtypes, name))


def is_array(value: Any) -> bool:
    """A NumPy array, a torch tensor or :func:`packed` bytes (the arguments a kernel traces as
    HBM tensors)."""
    if isinstance(value, Packed):
        return True
    module = type(value).__module__
    return (module.startswith("numpy") and hasattr(value, "dtype")) or _torch_module(module)


def _torch_module(module: str) -> bool:
    """A module of torch itself (not ``torch_nki``, whose ``nl`` dtypes are kernel arguments
    too)."""
    return module == "torch" or module.startswith("torch.")


def is_torch(value: Any) -> bool:
    if isinstance(value, Packed):
        return is_torch(value.data)
    return _torch_module(type(value).__module__)


def spec(value: Any) -> tuple[list[int], DType]:
    """Shape and NKI dtype of an array."""
    if isinstance(value, Packed):
        return list(value.shape), value.dtype
    return [int(s) for s in value.shape], as_dtype(value.dtype)


def to_bytes(value: Any) -> bytes:
    """The array's elements, row-major, little-endian."""
    if isinstance(value, Packed):
        return to_bytes(value.data)
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

    if dtype in _PACKED_NATIVE:
        # Packed MX outputs: their bytes, as uint8.
        shape = [*shape[:-1], shape[-1] * _PACKED_NATIVE[dtype]] if shape else [_PACKED_NATIVE[dtype]]
        if like_torch:
            import torch

            return torch.frombuffer(bytearray(data), dtype=torch.uint8).reshape(shape)
        return np.frombuffer(data, dtype=np.uint8).reshape(shape).copy()
    if like_torch:
        import torch

        if dtype not in NKI_TO_TORCH:
            raise TypeError(f"torch_nki.nki: outputs of dtype {dtype} have no torch equivalent")
        raw = torch.frombuffer(bytearray(data), dtype=torch.uint8)
        return raw.view(NKI_TO_TORCH[dtype]).reshape(shape)
    return np.frombuffer(data, dtype=numpy_dtype(_BY_NATIVE[dtype])).reshape(shape).copy()

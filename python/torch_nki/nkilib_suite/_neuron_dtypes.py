"""A stand-in for ``neuron_dtypes``, the NumPy dtype helpers of the Neuron compiler packages
(not on PyPI) that nki-library's tests and references import: the same names, over NumPy and
ml_dtypes (``bfloat16`` and the fp8 formats, with the encodings ``docs/nki-coverage.md``
lists)."""

from __future__ import annotations

from typing import Any

import ml_dtypes
import numpy as np

from torch_nki.nki import language as _nl

bfloat16 = ml_dtypes.bfloat16
float8_e4m3 = ml_dtypes.float8_e4m3
float8_e4m3fn = ml_dtypes.float8_e4m3fn
float8_e5m2 = ml_dtypes.float8_e5m2
float8_e8m0fnu = ml_dtypes.float8_e8m0fnu
float8_e5m2_x4 = _nl.float8_e5m2_x4.dtype
float8_e4m3fn_x4 = _nl.float8_e4m3fn_x4.dtype
float4_e2m1fn_x4 = _nl.float4_e2m1fn_x4.dtype

_FLOATS = {np.dtype(t) for t in (bfloat16, float8_e4m3, float8_e4m3fn, float8_e5m2, float8_e8m0fnu)}


def static_cast(array: Any, dtype: Any) -> Any:
    """``array`` converted to ``dtype`` with round-to-nearest-even (NumPy's ``astype``, which
    ml_dtypes implements that way for its types)."""
    return np.asarray(array).astype(np.dtype(dtype))


def sizeinbytes(dtype: Any) -> int:
    """Bytes per element of ``dtype``."""
    return int(np.dtype(dtype).itemsize)


def is_float_type(dtype: Any) -> bool:
    """Whether ``dtype`` is a floating-point type (NumPy's or ml_dtypes')."""
    d = np.dtype(dtype)
    return d.kind == "f" or d in _FLOATS


def finfo(dtype: Any) -> Any:
    """``ml_dtypes.finfo`` (which also covers NumPy's float types)."""
    return ml_dtypes.finfo(np.dtype(dtype))  # type: ignore[no-untyped-call]

"""``nki.language``'s data-movement functions lowered to NKI 0.7's instructions as NKI lowers
them: ``nl.load_transpose2d`` (a DMA transpose, ``nisa.dma_transpose``) and
``nl.gather_flattened`` (GpSimd's per-partition gather, ``nisa.nc_n_gather``, which the release
notes name as its successor). A ``dtype`` other than the source's adds a ``nisa.tensor_copy``
into a tile of that dtype, since neither instruction converts. Every result is a new SBUF tile;
the instructions carry the kernel line that called the function."""

from __future__ import annotations

from typing import Any

from torch_nki.nki._trace import unsupported, where
from torch_nki.nki._values import HbmView, Tile, TileRegion


def _isa(name: str) -> Any:
    from torch_nki.nki import isa

    return isa.instruction(name)


def _nl() -> Any:
    from torch_nki.nki import language

    return language


def _cast(result: Tile, dtype: Any) -> Tile:
    """``result``, or a copy of it in ``dtype`` (``nisa.tensor_copy`` rounds on write)."""
    if dtype is None or _nl().as_dtype(dtype) == result.dtype:
        return result
    out: Tile = _nl().ndarray(result.shape, _nl().as_dtype(dtype), buffer=_nl().sbuf)
    _isa("tensor_copy")(dst=out, src=result)
    return out


def load_transpose2d(src: Any, dtype: Any = None) -> Tile:
    """``nl.load_transpose2d``: a 2-D HBM view ``[N, M]`` into a new SBUF tile ``[M, N]``,
    transposed on the DMA engines (``nisa.dma_transpose``, NeuronCore-v3 and newer, so on trn1
    it fails validation as the instruction does), then cast to ``dtype`` when given."""
    if not isinstance(src, HbmView):
        raise TypeError(f"nl.load_transpose2d takes an HBM tensor or view, got {src!r} ({where()})")
    if len(src.shape) != 2:
        raise ValueError(f"nl.load_transpose2d transposes a 2-D view, got shape {src.shape} ({where()})")
    rows, cols = src.shape
    out: Tile = _nl().ndarray((cols, rows), src.dtype, buffer=_nl().sbuf)
    _isa("dma_transpose")(dst=out, src=src)
    return _cast(out, dtype)


def gather_flattened(data: Any, indices: Any, axis: int = 0, dtype: Any = None) -> Tile:
    """``nl.gather_flattened``: for every element of ``indices`` (uint32), the element of the
    same partition of ``data`` its value indexes, the free dimensions of ``data`` flattened
    (``np.take_along_axis`` on ``[P, F]``), via ``nisa.nc_n_gather``; the result has
    ``indices``' shape and ``data``'s dtype, or ``dtype`` when given. ``axis`` may only be 0, as
    in NKI's example: the docs do not say what another value gathers along."""
    for name, value in (("data", data), ("indices", indices)):
        if not isinstance(value, TileRegion):
            raise TypeError(f"nl.gather_flattened: {name} must be a tile, got {value!r} ({where()})")
    if axis != 0:
        raise unsupported(f"nl.gather_flattened(axis={axis!r})", "only axis=0, the flattened free dimensions")
    out: Tile = _nl().ndarray(indices.shape, data.dtype, buffer=_nl().sbuf)
    _isa("nc_n_gather")(dst=out, data=data, indices=indices)
    return _cast(out, dtype)

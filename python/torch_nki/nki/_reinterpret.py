"""Dtype views: a tile or device tensor seen as another dtype (NKI's ``.view(dtype)`` and
``.ap(..., dtype=...)``, a ``reinterpret_cast`` of the same bytes).

The simulator holds a tile's *values*, not its bytes, so a view cannot read the bytes in place.
A dtype view is therefore a view of a **shadow**: a tile (in the same buffer, the base tile's
partitions) or a private device tensor (flat) of the view's dtype, standing for the same memory.
Around every instruction that names a view, the frontend keeps the shadow in step with the
memory it stands for, over the elements the view covers:

- before the instruction, the covered bytes of the base are copied into the shadow;
- after it, if the instruction writes the view, the shadow's covered bytes are copied back.

Each copy is one ``dma_copy`` with ``reinterpret`` set (the bytes unchanged, read as the
destination's dtype); the device runs nothing for it (the view *is* that memory), so the cost
model charges nothing, while the dependence and race analyses see the accesses the view makes.

The covered elements are exact when the view's innermost dim is contiguous and aligned to both
dtypes (every view AWS's kernels make), or when the view's dtype is the wider one; otherwise the
span from its first to its last element, rounded out to whole elements of both dtypes.

What the simulator cannot hold is documented in docs/nki-frontend.md: a tile holds fp32 values,
so an integer above 2**24 in magnitude (the bytes of most fp32 values seen as int32) does not
survive the round trip.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from torch_nki.nki import _views
from torch_nki.nki._trace import current, location, unsupported, where

if TYPE_CHECKING:
    from torch_nki.nki._values import DType, HbmTensor, Tile


def _scaled(count: int, num: int, den: int, what: str) -> int:
    """``count · num / den``, which must be whole."""
    if (count * num) % den:
        raise ValueError(f"{what} ({where()})")
    return count * num // den


def tile_shadow(base: Tile, dtype: DType) -> Tile:
    """A shadow of ``base`` (a tile that is no view itself) seen as ``dtype``: the same
    partitions, each row the same bytes."""
    from torch_nki.nki._values import Tile

    row = _scaled(
        base.row,
        base.dtype.itemsize,
        dtype.itemsize,
        f"tile t{base.id}: a row of {base.row} {base.dtype} is not a whole number of {dtype}",
    )
    trace = current()
    file, line = location()
    np = base.np
    tile_id = trace.native.tile(np, row, dtype.native, base._buffer, file, line, None)
    shadow = Tile(tile_id, (np, row), dtype, base._buffer, trace)
    shadow.base = base
    trace.reinterpreting = True
    return shadow


def hbm_shadow(base: HbmTensor, dtype: DType) -> HbmTensor:
    """The shadow of ``base`` (a tensor that is no view itself) seen as ``dtype``: a flat
    private tensor of the same bytes, one per base tensor and dtype in a trace."""
    from torch_nki.nki._values import HbmTensor

    shadows: dict[str, HbmTensor] = base.__dict__.setdefault("_shadows", {})
    found = shadows.get(dtype.nki_name)
    if found is not None:
        return found
    numel = math.prod(base.shape)
    n = _scaled(
        numel,
        base.dtype.itemsize,
        dtype.itemsize,
        f"{base.name}: {numel} {base.dtype} is not a whole number of {dtype}",
    )
    trace = current()
    file, line = location()
    index = trace.native.scratch([n], dtype.native, file, line)
    shadow = HbmTensor(index, f"{base.name}.view({dtype})", (n,), dtype, trace, memory="private_hbm")
    shadow.base = base
    shadows[dtype.nki_name] = shadow
    trace.reinterpreting = True
    return shadow


def rescale_view(
    offset: int, dims: _views.Dims, old: DType, new: DType, what: str
) -> tuple[int, _views.Dims]:
    """``view(dtype)``'s arithmetic: the last dim (contiguous) scaled by the size ratio, the
    other strides and the offset converted to ``new`` elements."""
    a, b = old.itemsize, new.itemsize
    if not dims:
        dims = [(1, 1)]
    *outer, (size, stride) = dims
    if size != 1 and stride != 1:
        raise ValueError(f"{what}: the last dimension must be contiguous to view it as {new} ({where()})")
    bad = f"{what}: a {tuple(s for s, _ in dims)} {old} view is not a whole number of {new}"
    last = _scaled(size, a, b, bad)
    scaled = [(s, _scaled(st, a, b, bad)) for s, st in outer]
    return _scaled(offset, a, b, bad), [*scaled, (last, 1)]


def rescale_offset(offset: int, old: DType, new: DType, what: str) -> int:
    """An element offset of ``old`` as one of ``new`` (``ap(..., dtype=...)``: the pattern is
    given in ``new`` elements, the view's own offset carries over)."""
    return _scaled(
        offset,
        old.itemsize,
        new.itemsize,
        f"{what}: element {offset} of {old} does not start a {new} element",
    )


def covering(
    offset: int, dims: _views.Dims, view: DType, base: DType
) -> tuple[bool, int, _views.Dims, int, _views.Dims]:
    """The elements a view (``offset`` and ``dims`` in ``view`` elements) covers, as ``(exact,
    view offset, view dims, base offset, base dims)``: two walks of the same bytes with the same
    outer dims (the same rows for a DMA). ``exact`` when they are the view's own elements, not
    a span rounded out to whole elements of both dtypes."""
    a, b = base.itemsize, view.itemsize
    dims = list(dims) or [(1, 1)]
    if b >= a:
        k = b // a
        return True, offset, dims, offset * k, [*((s, st * k) for s, st in dims), (k, 1)]
    k = a // b
    *outer, (size, stride) = dims
    exact = (stride == 1 or size == 1) and size % k == 0 and offset % k == 0
    if exact and all(st % k == 0 for _, st in outer):
        return True, offset, dims, offset // k, [*((s, st // k) for s, st in outer), (size // k, 1)]
    lo = offset + sum(min(0, st) * (s - 1) for s, st in dims)
    hi = offset + sum(max(0, st) * (s - 1) for s, st in dims) + 1
    lo_a, hi_a = lo // k, -(-hi // k)
    return False, lo_a * k, [(1, 1), ((hi_a - lo_a) * k, 1)], lo_a, [(1, 1), (hi_a - lo_a, 1)]


@dataclass(frozen=True)
class Covered:
    """The part of a view's shadow that a sync copies: ``side`` (a tile region or an HBM view
    of the shadow), ``exact`` when it is the view's own elements."""

    side: Any
    exact: bool


def _sides(value: Any) -> tuple[Covered, Any] | None:
    """The shadow side and the base side of the copy that keeps view ``value`` in step, or
    ``None`` for a value that is no dtype view."""
    from torch_nki.nki._values import HbmView, TileRegion

    if isinstance(value, TileRegion):
        base = value.tile.base
        if base is None:
            return None
        rows = value.np if value.partition_step else 1
        exact, f0, dims, base_f0, base_dims = covering(value.f0, value.dims, value.dtype, base.dtype)
        shadow = TileRegion(value.tile, value.p0, rows, f0, dims)
        return Covered(shadow, exact), TileRegion(base, value.p0, rows, base_f0, base_dims)
    if isinstance(value, HbmView):
        tensor = value.tensor.base
        if tensor is None:
            return None
        if value.indirect is not None:
            raise unsupported(
                f"{value.tensor.name} with a runtime offset", "a runtime offset into a dtype view"
            )
        exact, offset, dims, base_offset, base_dims = covering(
            value.offset, value.dims, value.dtype, tensor.dtype
        )
        return Covered(HbmView(value.tensor, offset, dims), exact), HbmView(tensor, base_offset, base_dims)
    return None


def _flat(values: Any) -> list[Any]:
    return list(values) if isinstance(values, list | tuple) else [values]


def views_of(arguments: dict[str, Any]) -> list[tuple[str, Covered, Any]]:
    """``(parameter, shadow side, base side)`` of every dtype view among an instruction's
    arguments."""
    found = []
    for name, value in arguments.items():
        for v in _flat(value):
            sides = _sides(v)
            if sides is not None:
                found.append((name, *sides))
    return found


def sync(dst: Any, src: Any) -> None:
    """Records the copy of ``src``'s bytes into ``dst`` (one a view's shadow, the other the
    memory it stands for)."""
    trace = current()
    trace.native.reinterpret_copy(dst.operand(), src.operand(), *location())

"""What NKI kernel code holds: HBM tensors and their strided views, on-chip tiles and regions of
them. Indexing follows NumPy basic indexing (integers and unit-step slices); every view is plain
offsets and strides, so a ``dma_copy`` of it is one access pattern."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from torch_nki.nki._trace import current, unsupported, where


@dataclass(frozen=True)
class DType:
    """An NKI element type (``nl.float32``, ...)."""

    nki_name: str
    native: str
    """The simulator's name (``f32``, ``bf16``, ...)."""

    def __repr__(self) -> str:
        return f"nl.{self.nki_name}"


def _index_error(what: str) -> IndexError:
    return IndexError(f"{what} ({where()})")


def _normalise(key: Any, shape: Sequence[int], what: str) -> list[tuple[int, int] | int]:
    """Per dimension: ``(start, size)`` for a slice, the index for an integer (which drops the
    dimension). Missing trailing dimensions are whole."""
    if not isinstance(key, tuple):
        key = (key,)
    if any(k is Ellipsis for k in key):
        at = key.index(Ellipsis)
        fill = len(shape) - (len(key) - 1)
        key = key[:at] + (slice(None),) * fill + key[at + 1 :]
    if len(key) > len(shape):
        raise _index_error(f"{what}: {len(key)} indices for {len(shape)} dimensions")
    out: list[tuple[int, int] | int] = []
    key = key + (slice(None),) * (len(shape) - len(key))
    for dim, (k, size) in enumerate(zip(key, shape, strict=True)):
        if isinstance(k, bool) or not isinstance(k, int | slice):
            raise unsupported(f"indexing with {type(k).__name__}", "indices are integers and slices")
        if isinstance(k, int):
            index = k + size if k < 0 else k
            if not 0 <= index < size:
                raise _index_error(f"{what}: index {k} is out of bounds for dimension {dim} of size {size}")
            out.append(index)
            continue
        if k.step not in (None, 1):
            raise unsupported("slices with a step", f"{what} has step {k.step}")
        start = 0 if k.start is None else k.start
        stop = size if k.stop is None else k.stop
        start = start + size if start < 0 else start
        stop = stop + size if stop < 0 else stop
        if not 0 <= start <= stop <= size:
            raise _index_error(
                f"{what}: slice [{k.start}:{k.stop}] is out of bounds for dimension {dim} of size {size}"
            )
        out.append((start, stop - start))
    return out


class HbmView:
    """A strided window onto an HBM tensor: element ``[i0, i1, ...]`` is flat element
    ``offset + Σ ik·strides[k]`` of the tensor."""

    def __init__(self, tensor: HbmTensor, offset: int, dims: list[tuple[int, int]]) -> None:
        self.tensor = tensor
        self.offset = offset
        self.dims = dims
        """``[(size, stride), ...]``."""

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(size for size, _ in self.dims)

    @property
    def dtype(self) -> DType:
        return self.tensor.dtype

    def __getitem__(self, key: Any) -> HbmView:
        offset, dims = self.offset, []
        for (_, stride), k in zip(self.dims, _normalise(key, self.shape, self.tensor.name), strict=True):
            if isinstance(k, int):
                offset += k * stride
            else:
                offset += k[0] * stride
                dims.append((k[1], stride))
        return HbmView(self.tensor, offset, dims)

    def ap(self, pattern: Sequence[Sequence[int]], offset: int = 0) -> HbmView:
        """NKI's access pattern: ``pattern=[[stride, count], ...]`` (outermost first) and
        ``offset`` in elements, relative to this view's first element."""
        dims = []
        for entry in pattern:
            if len(entry) != 2:
                raise ValueError(f"{self.tensor.name}.ap: pattern entries are [stride, count], got {entry!r}")
            stride, count = int(entry[0]), int(entry[1])
            dims.append((count, stride))
        return HbmView(self.tensor, self.offset + int(offset), dims)

    def reshape(self, shape: Sequence[int]) -> HbmView:
        """The view with another shape of the same element count (the view must be contiguous)."""
        shape = [int(s) for s in shape]
        if math.prod(shape) != math.prod(self.shape) or not self._contiguous():
            raise ValueError(
                f"{self.tensor.name}: cannot reshape a {self.shape} view to {tuple(shape)} ({where()})"
            )
        dims, stride = [], 1
        for s in reversed(shape):
            dims.append((s, stride))
            stride *= s
        return HbmView(self.tensor, self.offset, dims[::-1])

    def _contiguous(self) -> bool:
        expect = 1
        for size, stride in reversed(self.dims):
            if size != 1 and stride != expect:
                return False
            expect *= size
        return True

    def broadcast_to(self, shape: Sequence[int]) -> HbmView:
        """NumPy broadcasting: new leading dimensions and size-1 dimensions get stride 0."""
        shape = [int(s) for s in shape]
        if len(shape) < len(self.dims):
            raise ValueError(f"cannot broadcast a {self.shape} view to {tuple(shape)} ({where()})")
        dims = [(0, 0)] * (len(shape) - len(self.dims)) + list(self.dims)
        out = []
        for (size, stride), want in zip(dims, shape, strict=True):
            if size == want:
                out.append((size, stride))
            elif size <= 1:
                out.append((want, 0))
            else:
                raise ValueError(f"cannot broadcast a {self.shape} view to {tuple(shape)} ({where()})")
        return HbmView(self.tensor, self.offset, out)

    def operand(self) -> tuple[Any, ...]:
        """The native DMA operand (of a tensor of the trace in progress)."""
        _owned(self.tensor.trace, f"tensor {self.tensor.name}")
        return ("hbm", self.tensor.id, self.offset, self.dims)

    def tile_shape(self) -> tuple[int, int]:
        """The ``[partitions, free]`` shape a DMA of this view moves (as the simulator merges
        it: rank 1 is one row, higher ranks merge the trailing dimensions)."""
        shape = self.shape
        if not shape:
            return (1, 1)
        if len(shape) == 1:
            return (1, shape[0])
        return (shape[0], math.prod(shape[1:]))

    def __repr__(self) -> str:
        return f"<{self.tensor.name} view {self.shape} at {self.offset}>"


class HbmTensor(HbmView):
    """A kernel argument, or an output allocated with ``nl.ndarray(..., buffer=nl.shared_hbm)``."""

    def __init__(self, tensor_id: int, name: str, shape: Sequence[int], dtype: DType, trace: object) -> None:
        self.id = tensor_id
        self.trace = trace
        """The trace that made it (its id means nothing in another)."""
        self.name = name
        self._dtype = dtype
        dims, stride = [], 1
        for s in reversed(shape):
            dims.append((int(s), stride))
            stride *= int(s)
        super().__init__(self, 0, dims[::-1])

    @property
    def dtype(self) -> DType:
        return self._dtype

    def __repr__(self) -> str:
        return f"<hbm {self.name} {self.shape} {self.dtype!r}>"


def _owned(owner: object, what: str) -> None:
    """Refuses a tile or tensor made by another kernel call's trace: its id would name a
    different tile (or none) in this one."""
    if owner is not current():
        raise ValueError(
            f"{what} belongs to another kernel call's trace; tiles and tensors cannot be kept "
            f"across calls ({where()})"
        )


class TileRegion:
    """Partitions ``p0..p0+np`` of a tile and, in each, the free elements ``f0..f0+nf`` seen
    with the free dimensions ``free`` (row-major, ``nf`` their product). A region is always one
    contiguous run of free elements per partition, which is what an instruction operand is.

    Python operators are the ``nl`` tile-level operations: ``a + b``, ``a - 1.0``, ``2.0 * a``,
    ``a / b``, ``-a``, ``a < b`` (``nl.add``, ... lowered to one instruction each; ``2.0 - a`` is
    ``-a + 2.0`` and ``2.0 / a`` is ``nl.reciprocal(a) * 2.0``). ``==`` and ``!=`` stay Python's
    identity comparisons: use ``nl.equal`` / ``nl.not_equal``."""

    def __init__(self, tile: Tile, p0: int, np: int, f0: int, free: tuple[int, ...]) -> None:
        self.tile = tile
        self.p0, self.np, self.f0 = p0, np, f0
        self.free = free
        self.nf = math.prod(free)

    @property
    def shape(self) -> tuple[int, ...]:
        """``(partitions, *free dims)``; a region with no free dimension left is ``(p, 1)``."""
        return (self.np, *self.free) if self.free else (self.np, 1)

    @property
    def dtype(self) -> DType:
        return self.tile.dtype

    @property
    def buffer(self) -> str:
        return self.tile.buffer

    def __getitem__(self, key: Any) -> TileRegion:
        """NumPy basic indexing over ``(partition, *free dims)``. An integer partition index keeps
        one partition; an integer free index drops its dimension, as in NumPy. The free elements
        selected must be one contiguous run (integer or one-element indices, then one slice, then
        whole dimensions): an instruction operand is a ``[partitions, run]`` region."""
        what = f"tile t{self.tile.id}"
        parts = _normalise(key, (self.np, *self.free) if self.free else (self.np, 1), what)
        p = parts[0]
        p0, np = (p, 1) if isinstance(p, int) else p
        dims = self.free or (1,)
        f0, free, strides = 0, [], [math.prod(dims[i + 1 :]) for i in range(len(dims))]
        # The run is contiguous when, scanning from the last dimension, every dimension is whole
        # until the first partial one, and every one before that selects a single element.
        partial = False
        for k, size, stride in reversed(list(zip(parts[1:], dims, strides, strict=True))):
            start, count = (k, 1) if isinstance(k, int) else k
            if partial and count != 1:
                raise unsupported(
                    f"{what}{_show_key(parts)}",
                    "a tile region is one contiguous run of free elements per partition "
                    f"(free dims {tuple(dims)})",
                )
            partial = partial or count != size
            f0 += start * stride
            if not isinstance(k, int):
                free.append(count)
        return TileRegion(self.tile, self.p0 + p0, np, self.f0 + f0, tuple(reversed(free)))

    def reshape(self, shape: Sequence[int]) -> TileRegion:
        """The region seen with another shape: the same partitions first, the same number of free
        elements after."""
        dims = tuple(int(s) for s in shape)
        if not dims or dims[0] != self.np or math.prod(dims[1:]) != self.nf:
            raise ValueError(
                f"tile t{self.tile.id}: cannot reshape a {self.shape} region to {dims} ({where()})"
            )
        return TileRegion(self.tile, self.p0, self.np, self.f0, dims[1:])

    def __setitem__(self, key: Any, value: Any) -> None:
        """``tile[...] = value``: a tile region is copied in (``nisa.tensor_copy``), an HBM view
        loaded (``nisa.dma_copy``), a number filled in (``nisa.memset``)."""
        from torch_nki.nki import isa

        dst = self[key]
        if isinstance(value, TileRegion):
            isa.instruction("tensor_copy")(dst=dst, src=value)
        elif isinstance(value, HbmView):
            isa.instruction("dma_copy")(dst=dst, src=value)
        elif isinstance(value, int | float) and not isinstance(value, bool):
            isa.instruction("memset")(dst=dst, value=float(value))
        else:
            raise TypeError(
                f"tile t{self.tile.id}[...] = value takes a tile, an HBM view or a number, "
                f"got {value!r} ({where()})"
            )

    def __bool__(self) -> bool:
        raise TypeError(
            f"the values of tile t{self.tile.id} are not known while the kernel is traced, so it has no "
            f"truth value; compare in the kernel's caller on its outputs ({where()})"
        )

    def _binary(self, name: str, other: Any) -> Any:
        from torch_nki.nki import language

        return language.FUNCTIONS[name](self, other)

    def __add__(self, other: Any) -> Any:
        return self._binary("add", other)

    def __radd__(self, other: Any) -> Any:
        return self._binary("add", other)

    def __sub__(self, other: Any) -> Any:
        return self._binary("subtract", other)

    def __rsub__(self, other: Any) -> Any:
        return (-self)._binary("add", other)

    def __mul__(self, other: Any) -> Any:
        return self._binary("multiply", other)

    def __rmul__(self, other: Any) -> Any:
        return self._binary("multiply", other)

    def __truediv__(self, other: Any) -> Any:
        return self._binary("divide", other)

    def __rtruediv__(self, other: Any) -> Any:
        from torch_nki.nki import language

        return language.FUNCTIONS["reciprocal"](self)._binary("multiply", other)

    def __neg__(self) -> Any:
        from torch_nki.nki import language

        return language.negative(self)

    def __lt__(self, other: Any) -> Any:
        return self._binary("less", other)

    def __le__(self, other: Any) -> Any:
        return self._binary("less_equal", other)

    def __gt__(self, other: Any) -> Any:
        return self._binary("greater", other)

    def __ge__(self, other: Any) -> Any:
        return self._binary("greater_equal", other)

    def operand(self) -> tuple[int, int, int, int, int]:
        """The native region tuple (of a tile of the trace in progress)."""
        _owned(self.tile.trace, f"tile t{self.tile.id}")
        return (self.tile.id, self.p0, self.np, self.f0, self.nf)

    def __repr__(self) -> str:
        return (
            f"<t{self.tile.id}[{self.p0}:{self.p0 + self.np}, {self.f0}:{self.f0 + self.nf}] as {self.shape}>"
        )


def _show_key(parts: Sequence[tuple[int, int] | int]) -> str:
    return "[" + ", ".join(str(k) if isinstance(k, int) else f"{k[0]}:{k[0] + k[1]}" for k in parts) + "]"


class Tile(TileRegion):
    """A tile in SBUF or PSUM: the partition dimension first, then any number of free
    dimensions (a 1-D shape ``(p,)`` is ``[p, 1]``). The simulator stores ``[partitions, free
    elements]``; the free dimensions are how the kernel indexes them."""

    def __init__(self, tile_id: int, shape: Sequence[int], dtype: DType, buffer: str, trace: object) -> None:
        self.id = tile_id
        self.trace = trace
        """The trace that made it (its id means nothing in another)."""
        self._dtype = dtype
        self._buffer = buffer
        dims = tuple(int(s) for s in shape)
        super().__init__(self, 0, dims[0], 0, dims[1:])

    @property
    def dtype(self) -> DType:
        return self._dtype

    @property
    def buffer(self) -> str:
        return self._buffer

    def __repr__(self) -> str:
        return f"<tile t{self.id} {self.shape} {self.dtype!r} in {self.buffer}>"


def tile_shape(shape: Sequence[int]) -> tuple[int, int]:
    """``[partitions, free]`` of an ``nl.ndarray`` shape."""
    dims = [int(s) for s in shape]
    if not dims:
        raise ValueError(f"a tile needs at least one dimension ({where()})")
    return (dims[0], math.prod(dims[1:]) if len(dims) > 1 else 1)

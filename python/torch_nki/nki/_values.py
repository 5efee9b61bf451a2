"""What NKI kernel code holds: HBM tensors and their strided views, on-chip tiles and views of
them. Indexing follows NumPy basic indexing (integers and slices, steps included); every view
is plain offsets and strides (the algebra in ``_views``), so an instruction operand is one
access pattern."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from torch_nki.nki import _views
from torch_nki.nki._trace import current, unsupported, where


class DType:
    """An NKI element type (``nl.float32``, ...). As in NKI, it is NumPy-compatible: host code
    may pass it wherever NumPy takes a dtype (``np.zeros(shape, dtype=nl.bfloat16)``,
    ``array.astype(nl.float8_e4m3fn)``), and it equals the NumPy dtype it stands for
    (:attr:`dtype`; see :func:`torch_nki.nki._arrays.numpy_dtype` for which that is). It is a
    plain immutable value, not a dataclass: ``dataclasses.asdict`` of a kernel configuration
    that holds one keeps it as it is, as it keeps a NumPy dtype."""

    __slots__ = ("native", "nki_name")

    nki_name: str
    native: str
    """The simulator's name (``f32``, ``bf16``, ...)."""

    def __init__(self, nki_name: str, native: str) -> None:
        object.__setattr__(self, "nki_name", nki_name)
        object.__setattr__(self, "native", native)

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError(f"nl.{self.nki_name} is immutable")

    def __reduce__(self) -> tuple[Any, tuple[str, str]]:
        return (DType, (self.nki_name, self.native))

    def __copy__(self) -> DType:
        return self

    def __deepcopy__(self, memo: dict[int, Any]) -> DType:
        return self

    def __repr__(self) -> str:
        return f"nl.{self.nki_name}"

    def __str__(self) -> str:
        """The bare name (``float32``), as ``str`` of a NumPy dtype and of NKI's own dtype
        values: AWS's kernels compare ``str(dtype) == str(nl.float32)``."""
        return self.nki_name

    @property
    def dtype(self) -> Any:
        """The NumPy dtype holding this type's host arrays (NumPy reads a ``dtype`` attribute
        when it is given an object as a dtype)."""
        from torch_nki.nki._arrays import numpy_dtype

        return numpy_dtype(self)

    @property
    def itemsize(self) -> int:
        """Bytes per element."""
        return int(self.dtype.itemsize)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, DType):
            return self.native == other.native
        if other is None or isinstance(other, int | float | Tile | TileRegion | HbmView):
            return False
        try:
            import numpy as np

            return bool(np.dtype(other) == self.dtype)  # type: ignore[call-overload]
        except (TypeError, ImportError):
            return False

    def __hash__(self) -> int:
        return hash(self.native)


class HbmView:
    """A strided window onto an HBM tensor: element ``[i0, i1, ...]`` is flat element
    ``offset + Σ ik·strides[k]`` of the tensor."""

    def __init__(
        self,
        tensor: HbmTensor,
        offset: int,
        dims: list[tuple[int, int]],
        indirect: tuple[str, Any, int] | None = None,
    ) -> None:
        self.tensor = tensor
        self.offset = offset
        self.dims = dims
        """``[(size, stride), ...]``."""
        self.indirect = indirect
        """A runtime offset: ``("scalar" | "vector", index tile view, elements per index)``, or
        ``("register", VirtualRegister, elements per index)``."""

    def is_indirect(self) -> bool:
        """Whether the view has a runtime offset (``scalar_offset`` / ``vector_offset``)."""
        return self.indirect is not None

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(size for size, _ in self.dims)

    @property
    def dtype(self) -> DType:
        return self.tensor.dtype

    @property
    def buffer(self) -> Any:
        """The tensor's memory: ``nl.shared_hbm`` for arguments and outputs (HBM every program
        sees), ``nl.private_hbm`` for a program's scratch."""
        from torch_nki.nki import language

        return getattr(language, self.tensor.memory)

    def __getitem__(self, key: Any) -> HbmView:
        self._static("indexing")
        parts = _views.normalise(key, self.shape, self.tensor.name)
        offset, dims = _views.index(self.offset, self.dims, parts)
        return HbmView(self.tensor, offset, dims)

    def _static(self, what: str) -> None:
        if self.indirect is not None:
            raise ValueError(
                f"{self.tensor.name}: {what} of a view with a runtime offset (the docs allow no "
                f"further slicing of an indirect view) ({where()})"
            )

    def ap(
        self,
        pattern: Sequence[Sequence[int]],
        offset: int | None = 0,
        scalar_offset: Any = None,
        vector_offset: Any = None,
        indirect_dim: int = 0,
        dtype: Any = None,
    ) -> HbmView:
        """NKI's access pattern: ``pattern=[[stride, count], ...]`` (outermost first) and
        ``offset`` in elements, relative to this view's first element. ``scalar_offset`` (a
        ``(1, 1)`` integer tile or a ``VirtualRegister``) or ``vector_offset`` (a ``(rows, 1)``
        integer tile, ``indirect_dim`` 0) add a runtime offset: the index times the stride of
        this view's dim ``indirect_dim``, for the whole access or per row (whose pattern step is
        then not used), as the DMA runs."""
        what = f"{self.tensor.name}.ap"
        self._static(".ap")
        if dtype is not None and _dtype_name(dtype) != self.dtype.nki_name:
            target, start = self._as(dtype, what)
            start += 0 if offset is None else int(offset)
            return target.ap(pattern, start, scalar_offset, vector_offset, indirect_dim)
        dims = _views.pattern(pattern, what)
        start = self.offset + (0 if offset is None else int(offset))
        if scalar_offset is None and vector_offset is None:
            return HbmView(self.tensor, start, dims)
        if scalar_offset is not None and vector_offset is not None:
            raise ValueError(f"{what}: at most one of scalar_offset and vector_offset ({where()})")
        if not 0 <= indirect_dim < len(self.dims):
            raise ValueError(
                f"{what}: indirect_dim {indirect_dim} is not a dim of the {self.shape} view ({where()})"
            )
        kind, index = ("scalar", scalar_offset) if scalar_offset is not None else ("vector", vector_offset)
        from torch_nki.nki._registers import VirtualRegister

        if kind == "scalar" and isinstance(index, VirtualRegister):
            return HbmView(self.tensor, start, dims, ("register", index, self.dims[indirect_dim][1]))
        if not isinstance(index, TileRegion):
            raise TypeError(
                f"{what}: {kind}_offset must be an SBUF tile"
                f"{' or a VirtualRegister' if kind == 'scalar' else ''}, got {index!r} ({where()})"
            )
        if kind == "vector" and indirect_dim != 0:
            raise ValueError(f"{what}: vector_offset needs indirect_dim=0, as the NKI docs say ({where()})")
        return HbmView(self.tensor, start, dims, (kind, index, self.dims[indirect_dim][1]))

    def _as(self, dtype: Any, what: str) -> tuple[HbmTensor, int]:
        """The tensor holding this view's bytes as ``dtype`` (the tensor's shadow of that
        dtype, ``_reinterpret``, or the tensor itself for its own dtype) and this view's first
        element counted in it."""
        from torch_nki.nki import _reinterpret
        from torch_nki.nki.language import as_dtype

        new = as_dtype(dtype)
        base = self.tensor.base or self.tensor
        target = base if new == base.dtype else _reinterpret.hbm_shadow(base, new)
        return target, _reinterpret.rescale_offset(self.offset, self.dtype, new, what)

    def view(self, dtype: Any) -> HbmView:
        """The same bytes seen as ``dtype`` (NKI's ``view``): the last dimension, which must be
        contiguous, scaled by the ratio of the dtypes' sizes."""
        from torch_nki.nki import _reinterpret
        from torch_nki.nki.language import as_dtype

        self._static("view")
        if _dtype_name(dtype) == self.dtype.nki_name:
            return self
        what = f"{self.tensor.name}.view"
        target, _ = self._as(dtype, what)
        offset, dims = _reinterpret.rescale_view(self.offset, self.dims, self.dtype, as_dtype(dtype), what)
        return HbmView(target, offset, dims)

    def reshape(self, shape: Sequence[int]) -> HbmView:
        """The view with another shape of the same element count, where the strides allow it
        without a copy."""
        self._static("reshape")
        dims = _views.reshape(self.dims, shape)
        if dims is None:
            raise ValueError(
                f"{self.tensor.name}: cannot reshape a {self.shape} view to "
                f"{tuple(int(x) for x in shape)} ({where()})"
            )
        return HbmView(self.tensor, self.offset, dims)

    def broadcast_to(self, shape: Sequence[int]) -> HbmView:
        """NumPy broadcasting: new leading dimensions and size-1 dimensions get stride 0."""
        self._static("broadcast_to")
        return HbmView(self.tensor, self.offset, _views.broadcast(self.dims, shape, self.tensor.name))

    def operand(self) -> tuple[Any, ...]:
        """The native DMA operand ``("hbm", id, offset, dims, indirect)`` (of a tensor of the
        trace in progress), ``indirect`` ``None`` or ``(kind, index tile operand, scale)``."""
        _owned(self.tensor.trace, f"tensor {self.tensor.name}")
        indirect = None
        if self.indirect is not None:
            kind, index, scale = self.indirect
            # A tile view's operand tuple, or a register's ``("reg", id)``.
            indirect = (kind, index.operand(), scale)
        return ("hbm", self.tensor.id, self.offset, self.dims, indirect)

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
    """A kernel argument, or a tensor the kernel allocated in device memory with
    ``nl.ndarray(..., buffer=nl.shared_hbm)`` (an output, or scratch if not returned) or
    ``buffer=nl.private_hbm`` (scratch)."""

    def __init__(
        self,
        tensor_id: int,
        name: str,
        shape: Sequence[int],
        dtype: DType,
        trace: object,
        argument: int | None = None,
        memory: str = "shared_hbm",
    ) -> None:
        self.id = tensor_id
        self.trace = trace
        """The trace that made it (its id means nothing in another)."""
        self.name = name
        self.memory = memory
        """The ``nl`` buffer it lives in: ``shared_hbm`` or ``private_hbm``."""
        self._dtype = dtype
        self.argument = argument
        """For a kernel argument, its position among the array arguments (``None`` for an
        output the kernel allocated)."""
        self.base: HbmTensor | None = None
        """For a dtype view's shadow (``_reinterpret``), the tensor whose bytes it stands for."""
        self.written = False
        """A kernel argument the kernel has written: :attr:`id` now names the output holding
        its contents (see ``torch_nki.nki._inplace``)."""
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
    """A view of a tile: rows of partitions ``p0..p0+np`` (or partition ``p0`` repeated, for a
    partition broadcast), and in each row the free elements ``f0 + Σ ik·stride_k`` over the
    free dims ``dims`` (``(size, stride)`` pairs, outermost first; ``nf`` their sizes' product).
    A plain slice is a rectangle; step slices, ``.ap(...)``, ``.permute`` and broadcasts give
    strided walks, which every instruction operand may be (the NKI docs' access patterns).

    Python operators are the ``nl`` tile-level operations: ``a + b``, ``a - 1.0``, ``2.0 * a``,
    ``a / b``, ``-a``, ``a < b`` (``nl.add``, ... lowered to one instruction each; ``2.0 - a`` is
    ``-a + 2.0`` and ``2.0 / a`` is ``nl.reciprocal(a) * 2.0``). ``==`` and ``!=`` stay Python's
    identity comparisons: use ``nl.equal`` / ``nl.not_equal``."""

    _outside: str | None = None
    """Why this view (an ``.ap`` pattern) reaches outside its tile: an ``IndexError`` when an
    instruction uses it."""

    def __init__(
        self, tile: Tile, p0: int, np: int, f0: int, dims: _views.Dims, partition_step: int = 1
    ) -> None:
        self.tile = tile
        self.p0, self.np, self.f0 = p0, np, f0
        self.dims: _views.Dims = list(dims)
        """The free dims, ``[(size, stride), ...]``."""
        self.partition_step = partition_step if np > 1 else 1
        """1, or 0 when every row reads partition ``p0`` (a partition broadcast)."""

    @property
    def free(self) -> tuple[int, ...]:
        """The free dims' sizes."""
        return tuple(size for size, _ in self.dims)

    @property
    def nf(self) -> int:
        """Free elements per row."""
        return math.prod(self.free)

    @property
    def shape(self) -> tuple[int, ...]:
        """``(partitions, *free dims)``; a region with no free dimension left is ``(p, 1)``."""
        return (self.np, *self.free) if self.free else (self.np, 1)

    @property
    def dtype(self) -> DType:
        return self.tile.dtype

    @property
    def buffer(self) -> Any:
        """The tile's buffer (``nl.sbuf`` or ``nl.psum``)."""
        return self.tile.buffer

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def size(self) -> int:
        return self.np * self.nf

    @property
    def offset(self) -> int:
        """The view's first element, counted from the tile's start (``p0·free + f0``)."""
        return self.p0 * self.tile.row + self.f0

    @property
    def strides(self) -> tuple[int, ...]:
        """Element strides per dim, the partition dim's the tile's free size (0 if broadcast)."""
        return (self.tile.row * self.partition_step, *(stride for _, stride in self.dims))

    def get_pattern(self) -> list[list[int]]:
        """The view as an access pattern ``[[step, num], ...]``, partition entry first."""
        return [[step, num] for num, step in zip(self.shape, self.strides, strict=False)]

    def is_contiguous(self) -> bool:
        """Whether each partition's elements are one contiguous run in order."""
        return _views.is_dense(self.dims)

    def is_indirect(self) -> bool:
        """Always ``False``: the frontend has no indirect tile views yet."""
        return False

    def _view(
        self, p0: int, np: int, f0: int, dims: _views.Dims, partition_step: int | None = None
    ) -> TileRegion:
        step = self.partition_step if partition_step is None else partition_step
        return TileRegion(self.tile, p0, np, f0, dims, step)

    def _what(self) -> str:
        return f"tile t{self.tile.id}"

    def __getitem__(self, key: Any) -> TileRegion:
        """NumPy basic indexing over ``(partition, *free dims)``, steps included. An integer
        partition index keeps one partition; an integer free index drops its dimension, as in
        NumPy. Partitions are read contiguously, so a partition slice has step 1."""
        dims = self.dims or [(1, 1)]
        parts = _views.normalise(key, (self.np, *(s for s, _ in dims)), self._what())
        p = parts[0]
        if isinstance(p, int):
            p_start, np = p, 1
        else:
            p_start, np, p_step = p
            if p_step != 1:
                raise ValueError(
                    f"{self._what()}: partitions are read contiguously, so a partition slice has "
                    f"step 1, got step {p_step} ({where()})"
                )
        f0, free = _views.index(self.f0, dims, parts[1:])
        return self._view(self.p0 + p_start * self.partition_step, np, f0, free)

    def reshape(self, shape: Sequence[int]) -> TileRegion:
        """The region seen with another shape: the same partitions first, the free dims
        regrouped where their strides allow it without a copy."""
        dims = tuple(int(s) for s in shape)
        free = _views.reshape(self.dims, dims[1:]) if dims and dims[0] == self.np else None
        if free is None:
            raise ValueError(
                f"{self._what()}: cannot reshape a {self.shape} region to {dims} "
                f"(the partition dim stays; the free dims must regroup without a copy) ({where()})"
            )
        return self._view(self.p0, self.np, self.f0, free)

    def ap(
        self,
        pattern: Sequence[Sequence[int]],
        offset: int | None = None,
        scalar_offset: Any = None,
        vector_offset: Any = None,
        indirect_dim: int = 0,
        dtype: Any = None,
    ) -> TileRegion:
        """NKI's access pattern over the tile's storage: ``pattern[0]`` is the partition entry
        ``[step, num]`` (its step the tile's free size: partitions are read contiguously; or 0,
        one partition repeated, which only a DMA may read), the others the free dims.
        ``offset`` (elements) is added to this view's storage offset, as the API stub's
        docstring says (the access-pattern deep dive counts it from the tensor's start; the
        two agree on a whole tile); ``None`` keeps it."""
        what = f"{self._what()}.ap"
        if scalar_offset is not None or vector_offset is not None:
            raise unsupported(f"{what}(scalar_offset=/vector_offset=) on a tile", "dynamic tile offsets")
        if dtype is not None and _dtype_name(dtype) != self.dtype.nki_name:
            target, start = self._as(dtype, what)
            start += 0 if offset is None else int(offset)
            return target.ap(pattern, start)
        dims = _views.pattern(pattern, what)
        (np, p_step), free = dims[0], dims[1:]
        if np > 1 and p_step not in (self.tile.row, 0):
            raise ValueError(
                f"{what}: the partition entry's step must be the tile's free size {self.tile.row} "
                f"(partitions are read contiguously; 0 repeats one partition, which only a DMA can "
                f"read), got [{p_step}, {np}] ({where()})"
            )
        start = self.offset + (0 if offset is None else int(offset))
        row = self.tile.row
        region = TileRegion(self.tile, start // row, np, start % row, free, 1 if p_step else 0)
        region._outside = region._reach_outside(what)
        return region

    def _as(self, dtype: Any, what: str) -> tuple[Tile, int]:
        """The tile holding this region's bytes as ``dtype`` (a shadow of the tile,
        ``_reinterpret``, or the tile itself for its own dtype) and this region's first element
        counted in it."""
        from torch_nki.nki import _reinterpret
        from torch_nki.nki.language import as_dtype

        new = as_dtype(dtype)
        base = self.tile.base or self.tile
        target = base if new == base.dtype else _reinterpret.tile_shadow(base, new)
        f0 = _reinterpret.rescale_offset(self.f0, self.dtype, new, what)
        return target, self.p0 * target.row + f0

    def view(self, dtype: Any) -> TileRegion:
        """The same bytes seen as ``dtype`` (NKI's ``view``): the last dimension, which must be
        contiguous, scaled by the ratio of the dtypes' sizes."""
        from torch_nki.nki import _reinterpret
        from torch_nki.nki.language import as_dtype

        if _dtype_name(dtype) == self.dtype.nki_name:
            return self
        what = f"{self._what()}.view"
        target, _ = self._as(dtype, what)
        f0, dims = _reinterpret.rescale_view(self.f0, self.dims, self.dtype, as_dtype(dtype), what)
        return TileRegion(target, self.p0, self.np, f0, dims, self.partition_step)

    def _reach_outside(self, what: str) -> str | None:
        """Why the view reaches outside its tile, or ``None``. A view that does is an
        ``IndexError`` when an instruction uses it, not when it is made: AWS's kernels build a
        view for an iteration their own ``if`` then skips."""
        reach = self.f0 + sum(stride * (size - 1) for size, stride in self.dims if size > 0)
        low = self.f0 + sum(min(0, stride) * (size - 1) for size, stride in self.dims)
        rows = self.np if self.partition_step else 1
        if low < 0 or reach >= self.tile.row or self.p0 + rows > self.tile.np:
            return (
                f"{what}: the pattern {self.get_pattern()} at offset {self.offset} reaches outside "
                f"tile t{self.tile.id} {self.tile.shape} (made at {where()})"
            )
        return None

    def permute(self, dims: Sequence[int]) -> TileRegion:
        """The free dims reordered (``dims[0]`` must be 0: the partition dim stays first)."""
        order = [int(d) for d in dims]
        if not order or order[0] != 0:
            raise ValueError(
                f"{self._what()}.permute: dims[0] must be 0 (the partition dim), "
                f"got {tuple(order)} ({where()})"
            )
        free = _views.permute(self.dims, [d - 1 for d in order[1:]], f"{self._what()}.permute")
        return self._view(self.p0, self.np, self.f0, free)

    def broadcast(self, dim: int, size: int) -> TileRegion:
        """A size-1 free dim repeated ``size`` times (stride 0)."""
        dim = self._free_dim("broadcast", dim)
        if self.dims[dim - 1][0] != 1:
            raise ValueError(
                f"{self._what()}.broadcast: dim {dim} has size {self.dims[dim - 1][0]}, not 1 ({where()})"
            )
        dims = list(self.dims)
        dims[dim - 1] = (int(size), 0)
        return self._view(self.p0, self.np, self.f0, dims)

    def expand_dim(self, dim: int) -> TileRegion:
        """A size-1 dim inserted at free position ``dim``."""
        if not 1 <= dim <= len(self.dims) + 1:
            raise ValueError(f"{self._what()}.expand_dim: {dim} is not a free position ({where()})")
        dims = list(self.dims)
        dims.insert(dim - 1, (1, 0))
        return self._view(self.p0, self.np, self.f0, dims)

    def squeeze_dim(self, dim: int) -> TileRegion:
        """Free dim ``dim`` (of size 1) removed."""
        dim = self._free_dim("squeeze_dim", dim)
        if self.dims[dim - 1][0] != 1:
            raise ValueError(
                f"{self._what()}.squeeze_dim: dim {dim} has size {self.dims[dim - 1][0]}, not 1 ({where()})"
            )
        return self._view(self.p0, self.np, self.f0, self.dims[: dim - 1] + self.dims[dim:])

    def slice(self, dim: int, start: int, end: int, step: int = 1) -> TileRegion:
        """``start:end:step`` of dim ``dim``."""
        key: list[Any] = [slice(None)] * self.ndim
        key[dim] = slice(start, end, step)
        return self[tuple(key)]

    def select(self, dim: int, index: Any) -> TileRegion:
        """Index ``index`` of free dim ``dim``, which is removed."""
        if not isinstance(index, int) or isinstance(index, bool):
            raise unsupported(f"{self._what()}.select with a runtime index", "dynamic tile offsets")
        dim = self._free_dim("select", dim)
        key: list[Any] = [slice(None)] * self.ndim
        key[dim] = index
        return self[tuple(key)]

    def _free_dim(self, method: str, dim: int) -> int:
        rank = self.ndim
        at = dim + rank if dim < 0 else dim
        if not 1 <= at < rank or not self.dims:
            raise ValueError(
                f"{self._what()}.{method}: {dim} is not a free dim of a {self.shape} view ({where()})"
            )
        return at

    def broadcast_to(self, shape: Sequence[int]) -> TileRegion:
        """The view with size-1 free dims repeated to ``shape`` (the partition dim as it is;
        ``nl.broadcast_to`` also broadcasts one partition, with a DMA)."""
        shape = [int(s) for s in shape]
        if not shape or shape[0] != self.np:
            raise ValueError(
                f"{self._what()}: cannot broadcast the partition dim of a {self.shape} view to "
                f"{tuple(shape)} as a view ({where()})"
            )
        free = _views.broadcast(self.dims or [(1, 1)], shape[1:], self._what())
        return self._view(self.p0, self.np, self.f0, free)

    def partition_broadcast(self, np: int) -> TileRegion:
        """This one-partition view read ``np`` times (a DMA source only)."""
        return self._view(self.p0, int(np), self.f0, self.dims, partition_step=0)

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
        """``True``, as for any object, the way NKI 0.7's ``NkiTensor`` (which defines no truth
        value) behaves: ``if tile:`` is the library's "is not None". A tile holding a comparison
        (``a < b``, ``nl.equal(a, b)``) is a ``TypeError`` instead: its values are not known while
        the kernel is traced, and on the device such an ``if`` would silently always be taken."""
        if self.tile.comparison is not None:
            raise TypeError(
                f"tile t{self.tile.id} holds nl.{self.tile.comparison}(...), whose values are not "
                f"known while the kernel is traced, so it has no truth value; compare in the "
                f"kernel's caller on its outputs ({where()})"
            )
        return True

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

    def operand(self) -> tuple[Any, ...]:
        """The native region tuple ``("tile", id, p0, np, f0, nf, shape, pattern)`` (of a tile of
        the trace in progress): ``pattern`` is ``None`` for a rectangle, else
        ``(partition_step, [(step, count), ...])``."""
        tile, dims = self.tile, self.dims
        if tile.trace is not current():
            _owned(tile.trace, f"tile t{tile.id}")
        if self._outside is not None:
            raise IndexError(f"{self._outside}, used at {where()}")
        pattern = None
        if self.partition_step != 1 or not _views.is_dense(dims):
            pattern = (self.partition_step, [(stride, size) for size, stride in dims])
        free = tuple(size for size, _ in dims)
        shape = (self.np, *free) if free else (self.np, 1)
        return ("tile", tile.id, self.p0, self.np, self.f0, math.prod(free), shape, pattern)

    def __repr__(self) -> str:
        if self.partition_step == 1 and _views.is_dense(self.dims):
            rows, cols = f"{self.p0}:{self.p0 + self.np}", f"{self.f0}:{self.f0 + self.nf}"
            return f"<t{self.tile.id}[{rows}, {cols}] as {self.shape}>"
        return f"<t{self.tile.id}.ap({self.get_pattern()}, offset={self.offset}) as {self.shape}>"


def _dtype_name(dtype: Any) -> str:
    return str(getattr(dtype, "nki_name", dtype))


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
        self.base: Tile | None = None
        """For a dtype view's shadow (``_reinterpret``), the tile whose bytes it stands for."""
        self.comparison: str | None = None
        """The ``nl`` comparison whose result the tile-level call made this tile hold (its truth
        value is then an error, see ``__bool__``)."""
        dims = tuple(int(s) for s in shape)
        self.row = math.prod(dims[1:])
        """Free elements per partition (the storage's partition stride)."""
        super().__init__(self, 0, dims[0], 0, _views.row_major(dims[1:]))

    @property
    def dtype(self) -> DType:
        return self._dtype

    @property
    def buffer(self) -> Any:
        """The buffer the tile lives in (``nl.sbuf`` or ``nl.psum``; it also equals its name)."""
        from torch_nki.nki import language

        return getattr(language, self._buffer)

    def __repr__(self) -> str:
        return f"<tile t{self.id} {self.shape} {self.dtype!r} in {self._buffer}>"


def tile_shape(shape: Sequence[int]) -> tuple[int, int]:
    """``[partitions, free]`` of an ``nl.ndarray`` shape."""
    dims = [int(s) for s in shape]
    if not dims:
        raise ValueError(f"a tile needs at least one dimension ({where()})")
    return (dims[0], math.prod(dims[1:]) if len(dims) > 1 else 1)

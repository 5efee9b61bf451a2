"""``nki.language``'s tile-level operations beyond one operator or activation function, each
lowered to ``nisa`` instructions as NKI lowers them: reductions over free axes (``nl.sum``,
``max``, ``min``, ``prod``, ``mean``, ``var``, ``all``), ``nl.softmax``, ``nl.matmul``,
``nl.transpose``, ``nl.negative``, the creation functions (``nl.full``, ``ones``,
``zeros_like``, ``empty_like``) and ``nl.expand_dims``. Every result is a new tile; the
instructions carry the kernel line that called the function."""

from __future__ import annotations

import builtins
import itertools
import math
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from torch_nki.nki._trace import unsupported, where
from torch_nki.nki._values import DType, Tile, TileRegion

if TYPE_CHECKING:
    from torch_nki.nki.language import Buffer


def _isa(name: str) -> Any:
    from torch_nki.nki import isa

    return isa.instruction(name)


def _nl() -> Any:
    from torch_nki.nki import language

    return language


def _tile(fn: str, x: Any) -> TileRegion:
    if not isinstance(x, TileRegion):
        raise TypeError(f"nl.{fn} takes a tile, got {x!r} ({where()})")
    return x


def _reduced_axes(fn: str, x: TileRegion, axis: Any) -> int:
    """The first reduced dimension: ``axis`` must name the last contiguous free dimensions of
    ``x`` (``[1]``, ``[1, 2]``, ... as NKI requires; negative indices count from the end)."""
    rank = len(x.shape)
    axes = [axis] if isinstance(axis, int) else list(axis)
    if not axes or not builtins.all(isinstance(a, int) and not isinstance(a, bool) for a in axes):
        raise TypeError(f"nl.{fn}: axis must be an int or a sequence of ints, got {axis!r} ({where()})")
    norm = sorted(a + rank if a < 0 else a for a in axes)
    first = norm[0]
    if first < 1 or norm != list(range(first, rank)):
        raise ValueError(
            f"nl.{fn}: axis {axis!r} of a {x.shape} tile must be its last contiguous free "
            f"dimension(s), not the partition dimension 0 (e.g. axis={rank - 1}) ({where()})"
        )
    return first


def _out_dtype(x: TileRegion, dtype: Any) -> DType:
    return x.dtype if dtype is None else _nl().as_dtype(dtype)


def _columns(
    fn: str, x: TileRegion, axis: Any, keepdims: bool, dtype: DType
) -> tuple[Tile, list[tuple[TileRegion, TileRegion]]]:
    """The result tile of reducing ``x`` over ``axis``, and the ``(source run, (P, 1) result)``
    pairs to reduce: one per index of the dimensions kept before the reduced ones."""
    first = _reduced_axes(fn, x, axis)
    lead = x.shape[1:first]
    kept = (*lead, *([1] * (len(x.shape) - first))) if keepdims else lead
    out: Tile = _nl().ndarray((x.np, *kept) if kept else (x.np, 1), dtype, buffer=_nl().sbuf)
    column = out.reshape((x.np, math.prod(lead)))
    # One source walk per index of the kept dims (a view: strided when x is).
    keys: list[tuple[Any, ...]] = [
        (slice(None), *index) for index in itertools.product(*(range(n) for n in lead))
    ]
    pairs = [(x[key], column[:, k : k + 1]) for k, key in enumerate(keys)]
    return out, pairs


def _runs(x: TileRegion, first: int) -> list[TileRegion]:
    """The views of ``x`` over dims ``first..``, one per index of the free dims before them, in
    row-major order (strided when ``x`` is)."""
    lead = x.shape[1:first]
    keys: list[tuple[Any, ...]] = [(slice(None), *i) for i in itertools.product(*(range(n) for n in lead))]
    return [x[key] for key in keys]


def _all_free(t: TileRegion) -> tuple[int, ...]:
    """``axis=`` naming every free dim of ``t`` (an instruction reduces them all)."""
    return tuple(range(1, len(t.shape)))


def _reduce(fn: str, op: str, x: Any, axis: Any, dtype: Any, keepdims: bool) -> Tile:
    x = _tile(fn, x)
    out, pairs = _columns(fn, x, axis, keepdims, _out_dtype(x, dtype))
    operator = _nl().FUNCTIONS[op]
    for data, res in pairs:
        _isa("tensor_reduce")(dst=res, op=operator, data=data, axis=_all_free(data), keepdims=True)
    return out


def sum(x: Any, axis: Any, dtype: Any = None, keepdims: bool = False) -> Tile:
    """Sum along the last free axes (``nisa.tensor_reduce`` with ``nl.add``)."""
    return _reduce("sum", "add", x, axis, dtype, keepdims)


def max(x: Any, axis: Any, dtype: Any = None, keepdims: bool = False) -> Tile:
    """Maximum along the last free axes (``nisa.tensor_reduce`` with ``nl.maximum``)."""
    return _reduce("max", "maximum", x, axis, dtype, keepdims)


def min(x: Any, axis: Any, dtype: Any = None, keepdims: bool = False) -> Tile:
    """Minimum along the last free axes (``nisa.tensor_reduce`` with ``nl.minimum``)."""
    return _reduce("min", "minimum", x, axis, dtype, keepdims)


def prod(x: Any, axis: Any, dtype: Any = None, keepdims: bool = False) -> Tile:
    """Product along the last free axes (``nisa.tensor_reduce`` with ``nl.multiply``)."""
    return _reduce("prod", "multiply", x, axis, dtype, keepdims)


def _scaled_sum(fn: str, x: TileRegion, axis: Any, keepdims: bool, dtype: DType) -> tuple[Tile, float]:
    """The fp32 sums of ``x`` over ``axis`` (as ``fn``'s intermediate), and ``1 / count``."""
    first = _reduced_axes(fn, x, axis)
    sums = _reduce(fn, "add", x, axis, _nl().float32, keepdims)
    return sums, 1.0 / math.prod(x.shape[first:])


def mean(x: Any, axis: Any, dtype: Any = None, keepdims: bool = False) -> Tile:
    """Arithmetic mean along the last free axes: an fp32 sum (``nisa.tensor_reduce``), scaled
    by ``1 / count`` (``nisa.tensor_scalar``) into the result's dtype."""
    x = _tile(fn := "mean", x)
    sums, scale = _scaled_sum(fn, x, axis, keepdims, _out_dtype(x, dtype))
    out: Tile = _nl().ndarray(sums.shape, _out_dtype(x, dtype), buffer=_nl().sbuf)
    _isa("tensor_scalar")(dst=out, data=sums, op0=_nl().multiply, operand0=scale)
    return out


def var(x: Any, axis: Any, dtype: Any = None, keepdims: bool = False) -> Tile:
    """Biased variance along the last free axes, in fp32: the mean, the squared deviations
    (``nisa.tensor_scalar`` with the mean column, ``nisa.tensor_tensor``), their mean. As NKI
    documents, the result always keeps the reduced axes as size-one dimensions."""
    x = _tile(fn := "var", x)
    first = _reduced_axes(fn, x, axis)
    d = _out_dtype(x, dtype)
    f32 = _nl().float32
    means = mean(x, axis, f32, keepdims=True)
    out, pairs = _columns(fn, x, axis, True, d)
    count = math.prod(x.shape[first:])
    flat_means = means.reshape((x.np, len(pairs)))
    for i, (data, res) in enumerate(pairs):
        dev: Tile = _nl().ndarray(data.shape, f32, buffer=_nl().sbuf)
        column = flat_means[:, i : i + 1]
        _isa("tensor_scalar")(dst=dev, data=data, op0=_nl().subtract, operand0=column)
        _isa("tensor_tensor")(dst=dev, data1=dev, data2=dev, op=_nl().multiply)
        total: Tile = _nl().ndarray((x.np, 1), f32, buffer=_nl().sbuf)
        _isa("tensor_reduce")(dst=total, op=_nl().add, data=dev, axis=_all_free(dev), keepdims=True)
        _isa("tensor_scalar")(dst=res, data=total, op0=_nl().multiply, operand0=1.0 / count)
    return out


def all(x: Any, axis: Any, dtype: Any = None) -> Tile:
    """1.0 where every element along the last free axes is nonzero, else 0.0: ``x != 0``
    (``nisa.tensor_scalar``), then its minimum (``nisa.tensor_reduce``)."""
    x = _tile("all", x)
    nonzero: Tile = _nl().ndarray(x.shape, _nl().float32, buffer=_nl().sbuf)
    _isa("tensor_scalar")(dst=nonzero, data=x, op0=_nl().not_equal, operand0=0.0)
    return _reduce("all", "minimum", nonzero, axis, _out_dtype(x, dtype), False)


def softmax(x: Any, axis: Any = -1, dtype: Any = None) -> Tile:
    """``exp(x - max) / sum(exp(x - max))`` along the last free axes, in fp32: the row maximum
    (``nisa.tensor_reduce``), ``exp`` of the shifted values with their sum
    (``nisa.activation_reduce`` with a bias column), the reciprocal of the sum
    (``nisa.activation``) and a multiply into the result's dtype."""
    x = _tile(fn := "softmax", x)
    f32 = _nl().float32
    first = _reduced_axes(fn, x, axis)
    out: Tile = _nl().ndarray(x.shape, _out_dtype(x, dtype), buffer=_nl().sbuf)
    for data, dst in zip(_runs(x, first), _runs(out, first), strict=True):
        top: Tile = _nl().ndarray((x.np, 1), f32, buffer=_nl().sbuf)
        reduce_max = {"op": _nl().maximum, "axis": _all_free(data), "negate": True, "keepdims": True}
        _isa("tensor_reduce")(dst=top, data=data, **reduce_max)
        e: Tile = _nl().ndarray(data.shape, f32, buffer=_nl().sbuf)
        total: Tile = _nl().ndarray((x.np, 1), f32, buffer=_nl().sbuf)
        reduce = {"reduce_op": _nl().add, "reduce_res": total}
        _isa("activation_reduce")(dst=e, op=_nl().exp, data=data, bias=top, **reduce)
        _isa("activation")(dst=total, op=_nl().reciprocal, data=total)
        _isa("tensor_scalar")(dst=dst, data=e, op0=_nl().multiply, operand0=total)
    return out


def negative(x: Any, dtype: Any = None) -> Tile:
    """``-x`` (``nisa.tensor_scalar`` multiplying by ``-1.0``)."""
    x = _tile("negative", x)
    out: Tile = _nl().ndarray(x.shape, _out_dtype(x, dtype), buffer=_nl().sbuf)
    _isa("tensor_scalar")(dst=out, data=x, op0=_nl().multiply, operand0=-1.0)
    return out


def transpose(x: Any, dtype: Any = None) -> Tile:
    """A 2-D tile with its partition and free dimensions swapped: ``nisa.nc_transpose`` on the
    tensor engine, into a new PSUM tile (of ``x``'s dtype, the transpose's; ``dtype`` other
    than that is a copy to SBUF after it)."""
    x = _tile("transpose", x)
    if len(x.shape) != 2:
        raise ValueError(f"nl.transpose takes a 2-D tile, got shape {x.shape} ({where()})")
    p, f = x.shape
    out: Tile = _nl().ndarray((f, p), x.dtype, buffer=_nl().psum)
    _isa("nc_transpose")(dst=out, data=x)
    if dtype is None or _nl().as_dtype(dtype) == x.dtype:
        return out
    cast: Tile = _nl().ndarray((f, p), _nl().as_dtype(dtype), buffer=_nl().sbuf)
    _isa("tensor_copy")(dst=cast, src=out)
    return cast


def matmul(x: Any, y: Any, transpose_x: bool = False) -> Tile:
    """``x @ y`` (or ``x.T @ y`` with ``transpose_x``) on the tensor engine, into a new fp32
    PSUM tile: ``nisa.nc_matmul`` with ``x`` stationary. Without ``transpose_x``, ``x`` is first
    transposed (``nisa.nc_transpose`` into PSUM, copied to SBUF) so its partition dimension is
    the contraction, as NKI inserts that transpose."""
    x, y = _tile("matmul", x), _tile("matmul", y)
    if len(x.shape) != 2 or len(y.shape) != 2:
        raise ValueError(f"nl.matmul takes 2-D tiles, got shapes {x.shape} and {y.shape} ({where()})")
    stationary = x
    if not transpose_x:
        xt = transpose(x)
        stationary = _nl().ndarray(xt.shape, x.dtype, buffer=_nl().sbuf)
        _isa("tensor_copy")(dst=stationary, src=xt)
    k, m = stationary.shape
    if y.shape[0] != k:
        raise ValueError(
            f"nl.matmul: the contraction dimensions differ: x{'ᵀ' if transpose_x else ''} is "
            f"{stationary.shape[::-1]} and y is {y.shape} ({where()})"
        )
    out: Tile = _nl().ndarray((m, y.shape[1]), _nl().float32, buffer=_nl().psum)
    _isa("nc_matmul")(dst=out, stationary=stationary, moving=y)
    return out


def full(
    shape: Sequence[int], fill_value: float, dtype: Any, buffer: Buffer | None = None, name: str = ""
) -> Tile:
    """A new tile filled with ``fill_value`` (``nl.ndarray``, then ``nisa.memset``)."""
    nl = _nl()
    where_to = nl.sbuf if buffer is None else buffer
    if where_to is nl.shared_hbm:
        raise unsupported("nl.full(buffer=nl.shared_hbm)", "fill a tile and store it")
    tile: Tile = nl.ndarray(shape, dtype, buffer=where_to, name=name)
    _isa("memset")(dst=tile, value=float(fill_value))
    return tile


def ones(shape: Sequence[int], dtype: Any, buffer: Buffer | None = None, name: str = "") -> Tile:
    """A new tile of ones (``nl.full(shape, 1.0, ...)``)."""
    return full(shape, 1.0, dtype, buffer, name)


def _like_buffer(x: TileRegion, buffer: Buffer | None) -> Buffer:
    nl = _nl()
    if buffer is not None:
        return buffer
    chosen: Buffer = nl.psum if x.buffer == "psum" else nl.sbuf
    return chosen


def zeros_like(x: Any, dtype: Any = None, buffer: Buffer | None = None, name: str = "") -> Tile:
    """A new tile of zeros of ``x``'s shape (and dtype, unless given) in ``buffer`` (default
    ``x``'s)."""
    x = _tile("zeros_like", x)
    return full(x.shape, 0.0, _out_dtype(x, dtype), _like_buffer(x, buffer), name)


def empty_like(x: Any, dtype: Any = None, buffer: Buffer | None = None, name: str = "") -> Tile:
    """A new, uninitialised tile of ``x``'s shape (and dtype, unless given) in ``buffer``
    (default ``x``'s)."""
    x = _tile("empty_like", x)
    tile: Tile = _nl().ndarray(x.shape, _out_dtype(x, dtype), buffer=_like_buffer(x, buffer), name=name)
    return tile


def expand_dims(x: Any, axis: int) -> TileRegion:
    """A view of ``x`` with a size-one dimension inserted at ``axis`` (a free position: the
    partition dimension stays first)."""
    x = _tile("expand_dims", x)
    rank = len(x.shape) + 1
    at = axis + rank if axis < 0 else axis
    if not 1 <= at < rank:
        raise ValueError(
            f"nl.expand_dims: axis {axis} is not a free position of a rank-{rank} result ({where()})"
        )
    shape = list(x.shape)
    shape.insert(at, 1)
    view: TileRegion = x.reshape(shape)
    return view

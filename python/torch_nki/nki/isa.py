"""``nki.isa`` (``nisa``) as the torch-nki frontend implements it: each call records one
instruction through the native tracer (the same checks and messages as a Rust kernel, with
this line as its location). Arguments are NKI 0.6's, destination first; keyword arguments the
frontend does not implement raise ``NotImplementedError`` naming them."""

from __future__ import annotations

from typing import Any

from torch_nki.nki._trace import current, location, unsupported
from torch_nki.nki._values import HbmView, TileRegion
from torch_nki.nki.language import Function


def _region(value: Any, instruction: str, role: str) -> tuple[int, int, int, int, int]:
    if isinstance(value, TileRegion):
        return value.operand()
    if isinstance(value, HbmView):
        raise TypeError(
            f"nisa.{instruction}: {role} is an HBM tensor; only dma_copy moves data to and from HBM ({_at()})"
        )
    raise TypeError(f"nisa.{instruction}: {role} must be a tile, got {value!r} ({_at()})")


def _dma(value: Any, role: str) -> tuple[Any, ...]:
    if isinstance(value, HbmView):
        return value.operand()
    if isinstance(value, TileRegion):
        return ("tile", *value.operand())
    raise TypeError(f"nisa.dma_copy: {role} must be an HBM view or a tile, got {value!r} ({_at()})")


def _scalar(value: Any, instruction: str, role: str) -> Any:
    if isinstance(value, TileRegion):
        return value.operand()
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise TypeError(
            f"nisa.{instruction}: {role} must be a number or a (P, 1) tile, got {value!r} ({_at()})"
        )
    return float(value)


def _function(value: Any, instruction: str, role: str, kind: str) -> str:
    if isinstance(value, Function) and value.kind == kind:
        return value.name
    raise TypeError(f"nisa.{instruction}: {role} must be an nl {kind} (e.g. nl.add), got {value!r} ({_at()})")


def _at() -> str:
    file, line = location()
    return f"{file}:{line}"


def _no_extra(instruction: str, kwargs: dict[str, Any]) -> None:
    if kwargs:
        raise unsupported(f"nisa.{instruction}", f"keyword(s) {sorted(kwargs)}")


def _wrote(dst: Any) -> None:
    if isinstance(dst, TileRegion):
        current().written.add(dst.tile.id)


def dma_copy(dst: Any, src: Any, **kwargs: Any) -> None:
    """Copies between HBM and SBUF (no cast: both sides have one dtype and one shape)."""
    _no_extra("dma_copy", kwargs)
    trace = current()
    trace.native.dma_copy(_dma(dst, "dst"), _dma(src, "src"), *location())
    _wrote(dst)


def tensor_tensor(dst: TileRegion, data1: TileRegion, data2: TileRegion, op: Function, **kwargs: Any) -> None:
    """Elementwise ``data1 <op> data2`` on the vector engine."""
    _no_extra("tensor_tensor", kwargs)
    current().native.tensor_tensor(
        _region(dst, "tensor_tensor", "dst"),
        _region(data1, "tensor_tensor", "data1"),
        _region(data2, "tensor_tensor", "data2"),
        _function(op, "tensor_tensor", "op", "operator"),
        *location(),
    )
    _wrote(dst)


def tensor_scalar(
    dst: TileRegion,
    data: TileRegion,
    op0: Function,
    operand0: Any,
    reverse0: bool = False,
    op1: Function | None = None,
    operand1: Any = None,
    reverse1: bool = False,
    **kwargs: Any,
) -> None:
    """``(data <op0> operand0) <op1> operand1``; operands are numbers or ``(P, 1)`` columns."""
    _no_extra("tensor_scalar", kwargs)
    if reverse0 or reverse1:
        raise unsupported("nisa.tensor_scalar(reverse0/reverse1=True)")
    name = "tensor_scalar"
    current().native.tensor_scalar(
        _region(dst, name, "dst"),
        _region(data, name, "data"),
        _function(op0, name, "op0", "operator"),
        _scalar(operand0, name, "operand0"),
        None if op1 is None else _function(op1, name, "op1", "operator"),
        None if operand1 is None else _scalar(operand1, name, "operand1"),
        *location(),
    )
    _wrote(dst)


def _activation(
    name: str,
    dst: TileRegion,
    op: Function,
    data: TileRegion,
    bias: TileRegion | None,
    scale: Any,
    reduce_op: Function | None,
    reduce_res: TileRegion | None,
) -> None:
    current().native.activation(
        _region(dst, name, "dst"),
        _function(op, name, "op", "activation"),
        _region(data, name, "data"),
        None if bias is None else _region(bias, name, "bias"),
        _scalar(scale, name, "scale"),
        None if reduce_op is None else _function(reduce_op, name, "reduce_op", "operator"),
        None if reduce_res is None else _region(reduce_res, name, "reduce_res"),
        *location(),
    )
    _wrote(dst)
    _wrote(reduce_res)


def activation(
    dst: TileRegion,
    op: Function,
    data: TileRegion,
    bias: TileRegion | None = None,
    scale: Any = 1.0,
    reduce_op: Function | None = None,
    reduce_res: TileRegion | None = None,
    **kwargs: Any,
) -> None:
    """``op(data * scale + bias)`` on the scalar engine (``bias`` a ``(P, 1)`` column, ``scale``
    a number or a column), with an optional row reduction into ``reduce_res``."""
    _no_extra("activation", kwargs)
    _activation("activation", dst, op, data, bias, scale, reduce_op, reduce_res)


def activation_reduce(
    dst: TileRegion,
    op: Function,
    data: TileRegion,
    reduce_op: Function,
    reduce_res: TileRegion,
    bias: TileRegion | None = None,
    scale: Any = 1.0,
    **kwargs: Any,
) -> None:
    """``activation`` that also reduces each row of the result into ``reduce_res``."""
    _no_extra("activation_reduce", kwargs)
    _activation("activation_reduce", dst, op, data, bias, scale, reduce_op, reduce_res)


def tensor_reduce(
    dst: TileRegion,
    op: Function,
    data: TileRegion,
    axis: Any,
    negate: bool = False,
    keepdims: bool = False,
    **kwargs: Any,
) -> None:
    """Reduces each partition's free elements into a ``(P, 1)`` destination (``axis`` 1)."""
    _no_extra("tensor_reduce", kwargs)
    axes = tuple(axis) if isinstance(axis, list | tuple) else (axis,)
    if len(axes) != 1:
        raise unsupported("nisa.tensor_reduce over several axes", f"axis={axis!r}")
    del keepdims  # tiles are [partition, free]: the result is a (P, 1) column either way
    current().native.tensor_reduce(
        _region(dst, "tensor_reduce", "dst"),
        _function(op, "tensor_reduce", "op", "operator"),
        _region(data, "tensor_reduce", "data"),
        int(axes[0]),
        bool(negate),
        *location(),
    )
    _wrote(dst)


def tensor_copy(dst: TileRegion, src: TileRegion, **kwargs: Any) -> None:
    """Copies with a cast to ``dst``'s dtype (e.g. PSUM fp32 into SBUF bf16)."""
    _no_extra("tensor_copy", kwargs)
    current().native.tensor_copy(
        _region(dst, "tensor_copy", "dst"), _region(src, "tensor_copy", "src"), *location()
    )
    _wrote(dst)


def memset(dst: TileRegion, value: float, **kwargs: Any) -> None:
    """Fills ``dst`` with ``value``."""
    _no_extra("memset", kwargs)
    current().native.memset(_region(dst, "memset", "dst"), float(value), *location())
    _wrote(dst)


def nc_transpose(dst: TileRegion, data: TileRegion, **kwargs: Any) -> None:
    """``dst = dataᵀ`` on the tensor engine: SBUF ``[P, F]`` into PSUM ``[F, P]``."""
    _no_extra("nc_transpose", kwargs)
    current().native.nc_transpose(
        _region(dst, "nc_transpose", "dst"), _region(data, "nc_transpose", "data"), *location()
    )
    _wrote(dst)


def nc_matmul(
    dst: TileRegion,
    stationary: TileRegion,
    moving: TileRegion,
    accumulate: bool | None = None,
    **kwargs: Any,
) -> None:
    """``dst (+)= stationaryᵀ · moving`` into PSUM, contracting over partitions.

    ``accumulate=None`` (NKI's default) accumulates when an earlier instruction of this trace
    wrote the destination tile and overwrites otherwise; pass ``True``/``False`` to decide."""
    _no_extra("nc_matmul", kwargs)
    trace = current()
    if accumulate is None:
        accumulate = isinstance(dst, TileRegion) and dst.tile.id in trace.written
    trace.native.nc_matmul(
        _region(dst, "nc_matmul", "dst"),
        _region(stationary, "nc_matmul", "stationary"),
        _region(moving, "nc_matmul", "moving"),
        bool(accumulate),
        *location(),
    )
    _wrote(dst)


def __getattr__(name: str) -> Any:
    if name.startswith("__"):
        raise AttributeError(name)
    raise unsupported(f"nisa.{name}")

"""``nki.isa`` (``nisa``) as the torch-nki frontend implements it: each call records one
instruction through the native tracer (the same checks and messages as a Rust kernel, with
this line as its location). Arguments are NKI 0.6's, destination first; keyword arguments the
frontend does not implement raise ``NotImplementedError`` naming them."""

from __future__ import annotations

import enum
from numbers import Integral
from typing import Any

from torch_nki.nki._trace import current, location, unsupported
from torch_nki.nki._values import HbmView, TileRegion
from torch_nki.nki.language import Function, maximum


class reduce_cmd(enum.Enum):
    """``nisa.reduce_cmd``: what an instruction's reduction does with the vector engine's
    accumulator. The frontend implements ``reset_reduce`` (start afresh, reduce this
    instruction's result and write it), which is what generated code passes."""

    idle = "idle"
    reset = "reset"
    reduce = "reduce"
    reset_reduce = "reset_reduce"


_RESET_REDUCE = reduce_cmd.reset_reduce


class engine(enum.Enum):
    """``nisa.engine``: the engine an instruction runs on. ``tensor_tensor`` takes ``vector``
    (the default for floating-point data, as ``unknown`` leaves it) or ``gpsimd`` (same
    arithmetic, no PSUM access); other instructions run on their fixed engine."""

    unknown = "unknown"
    tensor = "tensor"
    vector = "vector"
    scalar = "scalar"
    gpsimd = "gpsimd"
    dma = "dma"
    sync = "sync"


_TENSOR_TENSOR_ENGINES = (engine.unknown, engine.vector, engine.gpsimd)


def _engine(value: Any, instruction: str, allowed: tuple[engine, ...]) -> str:
    if isinstance(value, engine) and value in allowed:
        return value.value
    names = ", ".join(f"nisa.engine.{e.name}" for e in allowed)
    raise ValueError(f"nisa.{instruction}: engine must be one of {names}, got {value!r} ({_at()})")


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


def tensor_tensor(
    dst: TileRegion,
    data1: TileRegion,
    data2: TileRegion,
    op: Function,
    engine: engine = engine.unknown,
    **kwargs: Any,
) -> None:
    """Elementwise ``data1 <op> data2`` on the vector engine, or GpSimd with
    ``engine=nisa.engine.gpsimd``."""
    _no_extra("tensor_tensor", kwargs)
    chosen = _engine(engine, "tensor_tensor", _TENSOR_TENSOR_ENGINES)
    current().native.tensor_tensor(
        _region(dst, "tensor_tensor", "dst"),
        _region(data1, "tensor_tensor", "data1"),
        _region(data2, "tensor_tensor", "data2"),
        _function(op, "tensor_tensor", "op", "operator"),
        "vector" if chosen == "unknown" else chosen,
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


def scalar_tensor_tensor(
    dst: TileRegion,
    data: TileRegion,
    op0: Function,
    operand0: Any,
    op1: Function,
    operand1: TileRegion,
    reverse0: bool = False,
    reverse1: bool = False,
    reduce_cmd: reduce_cmd = _RESET_REDUCE,
    reduce_op: Function | None = None,
    reduce_res: TileRegion | None = None,
    **kwargs: Any,
) -> None:
    """``(data <op0> operand0) <op1> operand1`` on the vector engine: ``operand0`` a number or
    a ``(P, 1)`` column, ``operand1`` a tile of ``data``'s shape (``data`` and ``operand1``
    cannot both be in PSUM). With ``reduce_op`` and ``reduce_res`` (a ``(P, 1)`` tile), each row
    of the fp32 result is also reduced into ``reduce_res`` (``reduce_cmd`` must then be
    ``reduce_cmd.reset_reduce``, the default)."""
    _no_extra("scalar_tensor_tensor", kwargs)
    if reverse0 or reverse1:
        raise unsupported("nisa.scalar_tensor_tensor(reverse0/reverse1=True)")
    name = "scalar_tensor_tensor"
    if (reduce_op is None) != (reduce_res is None):
        given, missing = ("reduce_op", "reduce_res") if reduce_res is None else ("reduce_res", "reduce_op")
        raise ValueError(f"nisa.{name}: {given} needs {missing} too; pass both or neither ({_at()})")
    if reduce_res is not None and reduce_cmd is not _RESET_REDUCE:
        raise unsupported(f"nisa.{name}(reduce_cmd={reduce_cmd!r})", "only reduce_cmd.reset_reduce")
    current().native.scalar_tensor_tensor(
        _region(dst, name, "dst"),
        _region(data, name, "data"),
        _function(op0, name, "op0", "operator"),
        _scalar(operand0, name, "operand0"),
        _function(op1, name, "op1", "operator"),
        _region(operand1, name, "operand1"),
        None if reduce_op is None else _function(reduce_op, name, "reduce_op", "operator"),
        None if reduce_res is None else _region(reduce_res, name, "reduce_res"),
        *location(),
    )
    _wrote(dst)
    _wrote(reduce_res)


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


def bn_stats(dst: TileRegion, data: TileRegion, **kwargs: Any) -> None:
    """Per-partition ``(count, mean, variance·count)`` of the even and of the odd elements of
    ``data`` (at most 512 per partition) into ``dst`` ``(P, 6)``, on the vector engine."""
    _no_extra("bn_stats", kwargs)
    current().native.bn_stats(_region(dst, "bn_stats", "dst"), _region(data, "bn_stats", "data"), *location())
    _wrote(dst)


def bn_aggr(dst: TileRegion, data: TileRegion, **kwargs: Any) -> None:
    """Combines the ``bn_stats`` triples of ``data`` ``(P, 3k)`` into ``dst`` ``(P, 2)``: mean,
    then biased variance, on the vector engine."""
    _no_extra("bn_aggr", kwargs)
    current().native.bn_aggr(_region(dst, "bn_aggr", "dst"), _region(data, "bn_aggr", "data"), *location())
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


def _int32(value: Any, role: str) -> int:
    if isinstance(value, bool) or not isinstance(value, Integral) or not -(2**31) <= int(value) < 2**31:
        raise TypeError(f"nisa.iota: {role} must be an int32, got {value!r} ({_at()})")
    return int(value)


def _iota_step(pattern: Any, free: int) -> int:
    """The one step of ``pattern`` (``[[step, num], ...]``, outermost first) over ``free``
    elements: dimensions of size 1 drop out, and an outer dimension whose step is the inner
    dimension's step times its size continues it."""
    pairs = list(pattern) if isinstance(pattern, list | tuple) else None
    if pairs is None or not all(isinstance(d, list | tuple) and len(d) == 2 for d in pairs):
        raise TypeError(f"nisa.iota: pattern must be [[step, num], ...], got {pattern!r} ({_at()})")
    dims = [(_int32(step, "a pattern step"), _int32(num, "a pattern size")) for step, num in pairs]
    total = 1
    for _, num in dims:
        total *= num
    if total != free:
        raise ValueError(
            f"nisa.iota: pattern {pattern!r} covers {total} elements per partition "
            f"but dst has {free} ({_at()})"
        )
    # With one element per partition the step is never applied: keep the innermost one given
    # (what generated code writes for a one-column tile), so a round trip finds the same value.
    step, size = (dims[-1][0] if dims else 0), 1
    for outer_step, num in reversed([d for d in dims if d[1] != 1]):
        if size == 1:
            step, size = outer_step, num
        elif outer_step == step * size:
            size *= num
        else:
            raise unsupported(
                "nisa.iota with a pattern that is not one arithmetic progression",
                f"pattern={pattern!r}",
            )
    return step


def iota(dst: TileRegion, pattern: Any, offset: Any, channel_multiplier: Any = 0, **kwargs: Any) -> None:
    """Fills ``dst`` on GpSimd with ``offset + channel_multiplier * p + (w * step_w + ... + x *
    step_x)`` over the free elements the ``pattern`` ``[[step, num], ...]`` walks (int32
    arithmetic, written in ``dst``'s dtype). The pattern must be one arithmetic progression
    over the free elements (``[[step, nf]]``, which generated code passes); ``dst`` must be in
    SBUF."""
    _no_extra("iota", kwargs)
    region = _region(dst, "iota", "dst")
    current().native.iota(
        region,
        _int32(offset, "offset"),
        _int32(channel_multiplier, "channel_multiplier"),
        _iota_step(pattern, region[4]),
        *location(),
    )
    _wrote(dst)


def range_select(
    dst: TileRegion,
    on_true_tile: TileRegion,
    comp_op0: Function,
    comp_op1: Function,
    bound0: TileRegion,
    bound1: TileRegion,
    reduce_cmd: reduce_cmd = _RESET_REDUCE,
    reduce_res: TileRegion | None = None,
    reduce_op: Function = maximum,
    range_start: float = 0.0,
    on_false_value: float = 0.0,
    **kwargs: Any,
) -> None:
    """On the vector engine (NeuronCore-v3 and newer): ``dst[p, f] = on_true_tile[p, f]`` where
    ``i comp_op0 bound0[p]`` and ``i comp_op1 bound1[p]`` for ``i = f + range_start`` (fp32), and
    ``on_false_value`` elsewhere; with ``reduce_res``, each row of the result is reduced with
    ``reduce_op`` into it (``reduce_cmd`` must then be ``reduce_cmd.reset_reduce``, the
    default here)."""
    _no_extra("range_select", kwargs)
    name = "range_select"
    if reduce_res is not None and reduce_cmd is not _RESET_REDUCE:
        raise unsupported(f"nisa.range_select(reduce_cmd={reduce_cmd!r})", "only reduce_cmd.reset_reduce")
    for role, value in (("range_start", range_start), ("on_false_value", on_false_value)):
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise TypeError(f"nisa.range_select: {role} must be a number, got {value!r} ({_at()})")
    current().native.range_select(
        _region(dst, name, "dst"),
        _region(on_true_tile, name, "on_true_tile"),
        _function(comp_op0, name, "comp_op0", "operator"),
        _function(comp_op1, name, "comp_op1", "operator"),
        _region(bound0, name, "bound0"),
        _region(bound1, name, "bound1"),
        None if reduce_res is None else _region(reduce_res, name, "reduce_res"),
        _function(reduce_op, name, "reduce_op", "operator"),
        float(range_start),
        float(on_false_value),
        *location(),
    )
    _wrote(dst)
    _wrote(reduce_res)


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

"""``nki.language``'s rounding, remainder, normalisation, identity-matrix and debug-print
functions, lowered to ``nisa`` instructions (the docs do not say how NKI lowers them; this module
documents how the frontend does). Every result is a new tile; every instruction carries the kernel
line that called the function.

- ``nl.floor`` / ``nl.ceil`` / ``nl.trunc``: in fp32. ``r`` = ``x`` copied into an int32 tile
  (``nisa.tensor_copy``: the conversion rounds to the nearest integer, ties to even);
  ``floor = r - (r > x)``, ``ceil = r + (r < x)`` (``nisa.tensor_tensor`` twice);
  ``trunc = floor + (floor < x) * (x < 0)`` (``tensor_tensor``, ``scalar_tensor_tensor``,
  ``tensor_tensor``). Where ``|x| >= 2^23`` (already an integer in fp32, or beyond int32) and for
  NaN and infinities, ``x`` itself is kept (``|x| < 2^23`` by ``nisa.tensor_scalar``, then
  ``nisa.tensor_copy_predicated`` with ``reverse_pred``). A ``dtype`` other than fp32 is a last
  ``tensor_copy``.
- ``nl.fmod(x, y)`` = ``x - trunc(x / y) * y`` and ``nl.mod(x, y)`` = ``x - floor(x / y) * y``,
  each step in fp32 (``nl.divide``, the rounding above, a multiply and a subtract), so they are
  exact where ``x / y`` is not within an fp32 rounding of an integer (NumPy computes them
  exactly). ``x`` or ``y`` may be a number (not both; a number ``x`` is first an fp32 tile of
  ``y``'s shape, ``nisa.memset``); two tiles have one shape.
- ``nl.rms_norm(x, w, axis, n, epsilon)`` = ``x / sqrt(sum(x², axis) / n + epsilon) * w``, per
  run of the reduced (last free) axes: ``nisa.activation_reduce`` with ``nl.square`` and
  ``nl.add`` (the sum of squares), ``nisa.tensor_scalar`` (``/ n + epsilon``),
  ``nisa.activation`` with ``nl.rsqrt``, ``nisa.scalar_tensor_tensor`` (``x * rstd * w``).
  The intermediates are in ``compute_dtype`` (default fp32); ``w`` has ``x``'s shape.
- ``nl.shared_constant(constant, dtype=None)``: a read-only tensor in shared HBM (an
  ``HbmKind::Constant`` the traced ``Program`` carries with its values: the simulator fills it,
  codegen emits it as ``nl.shared_constant(np.array(...))``), of the array's shape and dtype
  (NumPy array, torch tensor, or the path of a ``.npy`` file; NumPy's float64 / int64 are not
  NKI dtypes: a ``TypeError``) or ``dtype`` if given (the values rounded to it, as a write
  rounds; older NKI's keyword, which nki-samples uses). Kernels ``nisa.dma_copy`` / ``nl.load``
  from it; it is not a kernel parameter.
- ``nl.shared_identity_matrix(n, dtype)``: an ``(n, n)`` SBUF tile (``n <= 128``, or ``dst``):
  ``nisa.iota`` of ``f - p`` into int32, then ``nisa.tensor_scalar`` with ``nl.equal`` and 0.
- ``nl.device_print(prefix, tensor)``: ``nisa.dma_copy`` of the tensor (an SBUF tile, an HBM
  tensor or view; a PSUM tile through a ``tensor_copy`` to SBUF first) into an extra output the
  traced ``Program`` carries after the kernel's own (named ``print{i}``). A kernel call prints
  each, after the simulation and in program order, as ``prefix`` then the values (a NumPy array)
  to ``sys.stdout``, appends ``(prefix, array)`` to :data:`DEVICE_PRINTS`, and returns only the
  kernel's outputs.
"""

from __future__ import annotations

import math
from typing import Any

from torch_nki.nki._trace import current, location, where
from torch_nki.nki._values import DType, HbmTensor, HbmView, Tile, TileRegion

DEVICE_PRINTS: list[tuple[str, Any]] = []
"""Every ``nl.device_print`` of the kernel calls so far, as ``(prefix, NumPy array)`` in program
order (what was also printed to stdout); clear it with ``DEVICE_PRINTS.clear()``."""

_EXACT = float(2**23)
"""From this magnitude on every fp32 value is an integer."""


def _nl() -> Any:
    from torch_nki.nki import language

    return language


def _isa(name: str) -> Any:
    from torch_nki.nki import isa

    return isa.instruction(name)


def _tile(fn: str, name: str, x: Any) -> TileRegion:
    if not isinstance(x, TileRegion):
        raise TypeError(f"nl.{fn}: {name} must be a tile, got {x!r} ({where()})")
    return x


def _new(shape: tuple[int, ...], dtype: DType) -> Tile:
    tile: Tile = _nl().ndarray(shape, dtype, buffer=_nl().sbuf)
    return tile


def _f32() -> DType:
    d: DType = _nl().float32
    return d


def _floor_f32(x: TileRegion) -> Tile:
    """``floor(x)`` in fp32 for ``|x| < 2^23`` (elsewhere unspecified): ``r - (r > x)`` where
    ``r`` is ``x`` rounded to the nearest integer by the int32 conversion."""
    nl = _nl()
    r = _new(x.shape, nl.int32)
    _isa("tensor_copy")(dst=r, src=x)
    above = _new(x.shape, _f32())
    _isa("tensor_tensor")(dst=above, data1=r, data2=x, op=nl.greater)
    out = _new(x.shape, _f32())
    _isa("tensor_tensor")(dst=out, data1=r, data2=above, op=nl.subtract)
    return out


def _ceil_f32(x: TileRegion) -> Tile:
    """``ceil(x)`` in fp32 for ``|x| < 2^23``: ``r + (r < x)``."""
    nl = _nl()
    r = _new(x.shape, nl.int32)
    _isa("tensor_copy")(dst=r, src=x)
    below = _new(x.shape, _f32())
    _isa("tensor_tensor")(dst=below, data1=r, data2=x, op=nl.less)
    out = _new(x.shape, _f32())
    _isa("tensor_tensor")(dst=out, data1=r, data2=below, op=nl.add)
    return out


def _trunc_f32(x: TileRegion) -> Tile:
    """``trunc(x)`` in fp32 for ``|x| < 2^23``: ``floor + (floor < x) * (x < 0)``."""
    nl = _nl()
    fl = _floor_f32(x)
    frac = _new(x.shape, _f32())
    _isa("tensor_tensor")(dst=frac, data1=fl, data2=x, op=nl.less)
    up = _new(x.shape, _f32())
    _isa("scalar_tensor_tensor")(dst=up, data=x, op0=nl.less, operand0=0.0, op1=nl.multiply, operand1=frac)
    _isa("tensor_tensor")(dst=fl, data1=fl, data2=up, op=nl.add)
    return fl


def _keep_large(x: TileRegion, rounded: Tile) -> None:
    """``rounded = x`` where ``|x| >= 2^23``, NaN or infinite (``x`` is its own rounding there)."""
    nl = _nl()
    small = _new(x.shape, _f32())
    _isa("tensor_scalar")(dst=small, data=x, op0=nl.abs, operand0=0.0, op1=nl.less, operand1=_EXACT)
    src: TileRegion = x
    if x.dtype != _f32():
        src = _new(x.shape, _f32())
        _isa("tensor_copy")(dst=src, src=x)
    _isa("tensor_copy_predicated")(dst=rounded, src=src, predicate=small, reverse_pred=True)


def _cast(result: Tile, dtype: DType) -> Tile:
    if dtype == result.dtype:
        return result
    out = _new(result.shape, dtype)
    _isa("tensor_copy")(dst=out, src=result)
    return out


def _rounding(fn: str, how: Any, x: Any, dtype: Any) -> Tile:
    t = _tile(fn, "x", x)
    out = how(t)
    _keep_large(t, out)
    return _cast(out, t.dtype if dtype is None else _nl().as_dtype(dtype))


def floor(x: Any, dtype: Any = None) -> Tile:
    """The largest integer ``<= x``, element-wise (see the module doc for the lowering)."""
    return _rounding("floor", _floor_f32, x, dtype)


def ceil(x: Any, dtype: Any = None) -> Tile:
    """The smallest integer ``>= x``, element-wise."""
    return _rounding("ceil", _ceil_f32, x, dtype)


def trunc(x: Any, dtype: Any = None) -> Tile:
    """``x`` with its fractional part dropped (rounded toward zero), element-wise."""
    return _rounding("trunc", _trunc_f32, x, dtype)


def _number(v: Any) -> bool:
    return isinstance(v, int | float) and not isinstance(v, bool)


def _remainder(fn: str, how: Any, x: Any, y: Any, dtype: Any) -> Tile:
    """``x - how(x / y) * y`` in fp32."""
    nl = _nl()
    if isinstance(x, TileRegion) and isinstance(y, TileRegion):
        if x.shape != y.shape:
            raise ValueError(
                f"nl.{fn}: x has shape {x.shape} but y has {y.shape}; nl.{fn} does not broadcast ({where()})"
            )
        shape = x.shape
        default = x.dtype if x.dtype == y.dtype else _f32()
    elif isinstance(x, TileRegion) and _number(y):
        shape, default = x.shape, x.dtype
    elif _number(x) and isinstance(y, TileRegion):
        shape, default = y.shape, y.dtype
    else:
        raise TypeError(
            f"nl.{fn}: x and y must be tiles or numbers, at least one a tile; got {x!r} and {y!r} ({where()})"
        )
    if not isinstance(x, TileRegion):
        # A number x is broadcast to y's shape: an fp32 tile of it (nisa.memset).
        filled = _new(shape, _f32())
        _isa("memset")(dst=filled, value=float(x))
        x = filled
    q = _new(shape, _f32())
    if isinstance(y, TileRegion):
        _isa("tensor_tensor")(dst=q, data1=x, data2=y, op=nl.divide)
    else:
        _isa("tensor_scalar")(dst=q, data=x, op0=nl.divide, operand0=float(y))
    whole = how(q)
    _keep_large(q, whole)
    if isinstance(y, TileRegion):
        _isa("tensor_tensor")(dst=whole, data1=whole, data2=y, op=nl.multiply)
    else:
        _isa("tensor_scalar")(dst=whole, data=whole, op0=nl.multiply, operand0=float(y))
    out = _new(shape, _f32())
    _isa("tensor_tensor")(dst=out, data1=x, data2=whole, op=nl.subtract)
    return _cast(out, default if dtype is None else nl.as_dtype(dtype))


def fmod(x: Any, y: Any, dtype: Any = None) -> Tile:
    """The remainder of ``x / y`` with the sign of ``x`` (C's ``fmod``): ``x - trunc(x / y) * y``."""
    return _remainder("fmod", _trunc_f32, x, y, dtype)


def mod(x: Any, y: Any, dtype: Any = None) -> Tile:
    """The remainder of ``x / y`` with the sign of ``y`` (Python's ``%``): ``x - floor(x / y) * y``."""
    return _remainder("mod", _floor_f32, x, y, dtype)


def rms_norm(
    x: Any, w: Any, axis: Any, n: int, epsilon: float = 1e-06, dtype: Any = None, compute_dtype: Any = None
) -> Tile:
    """``x / sqrt(sum(x², axis) / n + epsilon) * w`` (see the module doc for the lowering)."""
    from torch_nki.nki._tile_ops import _reduced_axes

    nl = _nl()
    t, weight = _tile("rms_norm", "x", x), _tile("rms_norm", "w", w)
    if weight.shape != t.shape:
        raise ValueError(
            f"nl.rms_norm: w has shape {weight.shape} but x has {t.shape}; they must match ({where()})"
        )
    if isinstance(n, bool) or not isinstance(n, int) or n <= 0:
        raise ValueError(f"nl.rms_norm: n must be a positive int, got {n!r} ({where()})")
    first = _reduced_axes("rms_norm", t, axis)
    lead = t.shape[1:first]
    count = 1
    for d in lead:
        count *= d
    run = 1
    for d in t.shape[first:]:
        run *= d
    cdt = _f32() if compute_dtype is None else nl.as_dtype(compute_dtype)
    out = _new(t.shape, t.dtype if dtype is None else nl.as_dtype(dtype))
    src, wts, dst = (v.reshape((t.np, count, run)) for v in (t, weight, out))
    for i in range(count):
        data = src[:, i, :]
        squares = _new(data.shape, cdt)
        total = _new((t.np, 1), cdt)
        _isa("activation_reduce")(dst=squares, op=nl.square, data=data, reduce_op=nl.add, reduce_res=total)
        _isa("tensor_scalar")(
            dst=total, data=total, op0=nl.multiply, operand0=1.0 / n, op1=nl.add, operand1=float(epsilon)
        )
        _isa("activation")(dst=total, op=nl.rsqrt, data=total)
        _isa("scalar_tensor_tensor")(
            dst=dst[:, i, :],
            data=data,
            op0=nl.multiply,
            operand0=total,
            op1=nl.multiply,
            operand1=wts[:, i, :],
        )
    return out


def shared_identity_matrix(n: int, dtype: Any = None, dst: Any = None) -> TileRegion:
    """An ``(n, n)`` identity matrix in a new SBUF tile of ``dtype`` (default ``nl.uint8``), or
    in ``dst``: ``nisa.iota`` of ``f - p``, then ``nisa.tensor_scalar`` ``== 0``."""
    nl = _nl()
    if isinstance(n, bool) or not isinstance(n, int) or not 1 <= n <= nl.tile_size.pmax:
        raise ValueError(
            f"nl.shared_identity_matrix: n must be an int in 1..{nl.tile_size.pmax} (the rows are "
            f"partitions), got {n!r} ({where()})"
        )
    if dst is None:
        target: TileRegion = _new((n, n), nl.uint8 if dtype is None else nl.as_dtype(dtype))
    else:
        target = _tile("shared_identity_matrix", "dst", dst)
        if target.shape != (n, n):
            raise ValueError(
                f"nl.shared_identity_matrix: dst has shape {target.shape}, not ({n}, {n}) ({where()})"
            )
    offsets = _new((n, n), nl.int32)
    _isa("iota")(dst=offsets, pattern=[[1, n]], offset=0, channel_multiplier=-1)
    _isa("tensor_scalar")(dst=target, data=offsets, op0=nl.equal, operand0=0.0)
    return target


def shared_constant(constant: Any, dtype: Any = None) -> HbmView:
    """A read-only shared-HBM tensor holding ``constant`` (see the module doc)."""
    import os

    import numpy as np

    from torch_nki.nki._arrays import is_array, spec

    nl = _nl()
    if isinstance(constant, str | os.PathLike):
        constant = np.load(os.fspath(constant))
    if isinstance(constant, HbmView | TileRegion):
        raise TypeError(
            f"nl.shared_constant: constant must be the array itself, got the kernel tensor {constant!r} "
            f"(an array passed to a kernel is an HBM input: make the constant inside the kernel or "
            f"take it from a global or closure) ({where()})"
        )
    if not is_array(constant):
        raise TypeError(
            f"nl.shared_constant: constant must be a NumPy array, a torch tensor or a .npy path, "
            f"got {constant!r} ({where()})"
        )
    shape = [int(s) for s in constant.shape]
    if dtype is not None:
        d: DType = nl.as_dtype(dtype)
    else:
        try:
            d = spec(constant)[1]
        except TypeError:
            raise TypeError(
                f"nl.shared_constant: {constant.dtype} is not an NKI dtype; convert the array "
                f"(e.g. .astype(np.float32)) or pass dtype= ({where()})"
            ) from None
    if hasattr(constant, "detach"):
        values = constant.detach().to("cpu").double().reshape(-1).tolist()
    else:
        values = np.asarray(constant, dtype=np.float64).reshape(-1).tolist()
    trace = current()
    file, line = location()
    index = trace.native.constant(shape, d.native, values, file, line)
    return HbmTensor(index, "shared_constant", shape, d, trace)


_PRINT_DTYPES = {"tfloat32", "float8_e4m3"}
"""Element types NumPy and torch lack: printed as float32."""


def device_print(print_prefix: Any, tensor: Any) -> None:
    """Records ``tensor``'s values at this point of the kernel, printed after the simulation
    (see the module doc)."""
    if not isinstance(print_prefix, str):
        raise TypeError(f"nl.device_print: print_prefix must be a str, got {print_prefix!r} ({where()})")
    if math.prod(current().grid) > 1:
        raise NotImplementedError(
            f"torch_nki.nki does not implement nl.device_print in a kernel launched on a grid "
            f"({where()}); see docs/nki-frontend.md for what is supported"
        )
    if isinstance(tensor, TileRegion | HbmView):
        shape = tensor.shape
    else:
        raise TypeError(
            f"nl.device_print: tensor must be a tile or an HBM tensor, got {tensor!r} ({where()})"
        )
    dtype = tensor.dtype
    if dtype.nki_name in _PRINT_DTYPES:
        dtype = _f32()
    trace = current()
    file, line = location()
    if isinstance(tensor, TileRegion) and (tensor.buffer == "psum" or dtype != tensor.dtype):
        staged = _new(shape, dtype)
        _isa("tensor_copy")(dst=staged, src=tensor)
        tensor = staged
    index = trace.native.output(list(shape), dtype.native, file, line)
    out = HbmTensor(index, f"print{len(trace.prints)}", shape, dtype, trace)
    trace.prints.append((print_prefix, out))
    _isa("dma_copy")(dst=out, src=tensor)

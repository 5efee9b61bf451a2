"""``nki.language``'s elementwise functions that are more than one operator or activation
function, lowered to ``nisa`` instructions (the docs do not say how NKI lowers them; this module
documents how the frontend does): ``nl.where`` (a copy of ``y``, then
``nisa.tensor_copy_predicated`` of ``x`` where the condition is nonzero), ``nl.logical_not``
(``nisa.tensor_scalar`` with ``nl.logical_xor`` and 1, the docs' "XOR with 1"), ``nl.cos``
(``sin(x + π/2)``: a ``tensor_scalar`` add into fp32, then ``activation`` with ``nl.sin``) and
``nl.tan`` (``sin(x) / cos(x)`` in fp32); and the buffer predicates ``nl.is_hbm``,
``is_on_chip``, ``is_psum``, ``is_sbuf``. Every result is a new SBUF tile."""

from __future__ import annotations

import math
from typing import Any

from torch_nki.nki._spec import SPEC
from torch_nki.nki._trace import where as line
from torch_nki.nki._values import DType, HbmView, Tile, TileRegion

_BUFFERS: dict[str, dict[str, Any]] = {b["name"]: b for b in SPEC["buffers"]}


def _nl() -> Any:
    from torch_nki.nki import language

    return language


def _isa(name: str) -> Any:
    from torch_nki.nki import isa

    return isa.instruction(name)


def _tile(fn: str, name: str, x: Any) -> TileRegion:
    if not isinstance(x, TileRegion):
        raise TypeError(f"nl.{fn}: {name} must be a tile, got {x!r} ({line()})")
    return x


def _new(shape: tuple[int, ...], dtype: DType) -> Tile:
    tile: Tile = _nl().ndarray(shape, dtype, buffer=_nl().sbuf)
    return tile


def _operand(fn: str, name: str, v: Any, shape: tuple[int, ...]) -> TileRegion | float:
    """A tile of ``shape`` or a number."""
    if isinstance(v, TileRegion):
        if v.shape != shape:
            raise ValueError(
                f"nl.{fn}: {name} has shape {v.shape} but the condition has {shape}; nl.where does not "
                f"broadcast ({line()})"
            )
        return v
    if isinstance(v, bool) or not isinstance(v, int | float):
        raise TypeError(f"nl.{fn}: {name} must be a tile or a number, got {v!r} ({line()})")
    return float(v)


def where(condition: Any, x: Any, y: Any, dtype: Any = None) -> Tile:
    """``x`` where ``condition`` is nonzero, ``y`` elsewhere (each a tile of the condition's
    shape or a number); the result is in ``dtype``, else the dtype of ``x`` (or of ``y``) when a
    tile, else the condition's."""
    cond = _tile("where", "condition", condition)
    xs, ys = _operand("where", "x", x, cond.shape), _operand("where", "y", y, cond.shape)
    if dtype is not None:
        out_dtype = _nl().as_dtype(dtype)
    else:
        tile = next((v for v in (xs, ys) if isinstance(v, TileRegion)), cond)
        out_dtype = tile.dtype
    out = _new(cond.shape, out_dtype)
    if isinstance(ys, TileRegion):
        _isa("tensor_copy")(dst=out, src=ys)
    else:
        _isa("memset")(dst=out, value=ys)
    src: TileRegion | float = xs
    if isinstance(xs, TileRegion) and xs.dtype != out_dtype:
        src = _new(cond.shape, out_dtype)
        _isa("tensor_copy")(dst=src, src=xs)
    _isa("tensor_copy_predicated")(dst=out, src=src, predicate=cond)
    return out


def logical_not(x: Any, dtype: Any = None) -> Tile:
    """1 where ``x`` is 0, 0 where it is 1 (``x`` logical-xor 1, as the docs implement it: meant
    for 0/1 inputs; any nonzero counts as 1)."""
    t = _tile("logical_not", "x", x)
    out = _new(t.shape, t.dtype if dtype is None else _nl().as_dtype(dtype))
    _isa("tensor_scalar")(dst=out, data=t, op0=_nl().logical_xor, operand0=1.0)
    return out


def _shifted_sin(fn: str, t: TileRegion, out: TileRegion, shift: float) -> None:
    """``out = sin(t + shift)``, the sum in fp32."""
    arg = _new(t.shape, _nl().float32)
    _isa("tensor_scalar")(dst=arg, data=t, op0=_nl().add, operand0=shift)
    _isa("activation")(dst=out, op=_nl().sin, data=arg)


def cos(x: Any, dtype: Any = None) -> Tile:
    """``cos x`` as ``sin(x + π/2)``."""
    t = _tile("cos", "x", x)
    out = _new(t.shape, t.dtype if dtype is None else _nl().as_dtype(dtype))
    _shifted_sin("cos", t, out, math.pi / 2)
    return out


def tan(x: Any, dtype: Any = None) -> Tile:
    """``tan x`` as ``sin(x) / cos(x)``, both in fp32."""
    t = _tile("tan", "x", x)
    f32 = _nl().float32
    s, c = _new(t.shape, f32), _new(t.shape, f32)
    _isa("activation")(dst=s, op=_nl().sin, data=t)
    _shifted_sin("tan", t, c, math.pi / 2)
    out = _new(t.shape, t.dtype if dtype is None else _nl().as_dtype(dtype))
    _isa("tensor_tensor")(dst=out, data1=s, data2=c, op=_nl().divide)
    return out


def _buffer(fn: str, buffer: Any) -> dict[str, Any]:
    """The declaration of the buffer ``buffer`` names: an ``nl`` buffer, its name, or a tile or
    HBM tensor (its buffer)."""
    if isinstance(buffer, TileRegion):
        name = buffer.buffer.name
    elif isinstance(buffer, HbmView):
        name = buffer.tensor.memory
    else:
        name = getattr(buffer, "name", buffer)
    if not isinstance(name, str) or name not in _BUFFERS:
        known = ", ".join(f"nl.{b}" for b in _BUFFERS)
        raise TypeError(f"nl.{fn}: expected an nl buffer ({known}), got {buffer!r}")
    return _BUFFERS[name]


def is_hbm(buffer: Any) -> bool:
    """Whether ``buffer`` is device memory (``hbm``, ``private_hbm``, ``shared_hbm``)."""
    return not _buffer("is_hbm", buffer)["on_chip"]


def is_on_chip(buffer: Any) -> bool:
    """Whether ``buffer`` is on chip (SBUF or PSUM)."""
    return bool(_buffer("is_on_chip", buffer)["on_chip"])


def is_psum(buffer: Any) -> bool:
    """Whether ``buffer`` is PSUM."""
    return bool(_buffer("is_psum", buffer)["name"] == "psum")


def is_sbuf(buffer: Any) -> bool:
    """Whether ``buffer`` is SBUF."""
    return bool(_buffer("is_sbuf", buffer)["name"] == "sbuf")

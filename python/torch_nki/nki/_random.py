"""``nki.language``'s random functions, lowered to ``nisa`` instructions as NKI 0.7 lowers them
(its release notes say which instruction ``nl.rand`` uses per target):

- ``nl.random_seed(seed)``: ``nisa.set_rng_seed`` of the ``[1, 1]`` on-chip 32-bit ``seed``
  tile (a Python number is a ``TypeError``, as in NKI);
- ``nl.rand(shape, dtype)``: on NeuronCore-v4+ ``nisa.rand2(min=0.0, max=1.0)`` on the vector
  engine; on older targets ``nisa.rng`` into a uint16 tile (the vector engine on NeuronCore-v2,
  GpSimd on NeuronCore-v3, so that ``nl.random_seed`` does not reach it there, as NKI's release
  notes warn) scaled by 2^-16 (``nisa.tensor_scalar``) into ``dtype``: values in ``[0, 1)`` in
  fp32, which a narrower ``dtype`` may round up to 1;
- ``nl.dropout(x, rate, dtype=None)``: ``nisa.dropout`` (a kept element is not rescaled), then a
  ``nisa.tensor_copy`` into ``dtype`` when it differs from ``x``'s.

The instructions carry the kernel line that called the function."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from torch_nki.nki._spec import SPEC
from torch_nki.nki._trace import current, unsupported, where
from torch_nki.nki._values import Tile, TileRegion

if TYPE_CHECKING:
    from torch_nki.nki.language import Buffer

#: ``nl.rand`` on the targets before NeuronCore-v4 scales 16 random bits by this.
RAND_SCALE = 1.0 / 65536.0


def _isa_module() -> Any:
    from torch_nki.nki import isa

    return isa


def _isa(name: str) -> Any:
    return _isa_module().instruction(name)


def _nl() -> Any:
    from torch_nki.nki import language

    return language


def random_seed(seed: Any) -> None:
    """Seeds the vector engine's generator (``nisa.set_rng_seed``) from the ``[1, 1]`` on-chip
    32-bit tile ``seed``."""
    if not isinstance(seed, TileRegion):
        raise TypeError(
            f"nl.random_seed takes a [1, 1] int32/uint32 tile on SBUF or PSUM (e.g. "
            f"nl.full((1, 1), 42, dtype=nl.int32)), got {seed!r} ({where()})"
        )
    _isa("set_rng_seed")(src_seeds=seed)


def rand(shape: Sequence[int], dtype: Any, buffer: Buffer | None = None, name: str = "") -> Tile:
    """A new tile of uniform random values in ``[0, 1)`` (see the module doc for the lowering)."""
    nl = _nl()
    where_to = nl.sbuf if buffer is None else buffer
    if where_to is nl.shared_hbm:
        raise unsupported("nl.rand(buffer=nl.shared_hbm)", "draw into a tile and store it")
    out: Tile = nl.ndarray(shape, dtype, buffer=where_to, name=name)
    version = dict(SPEC["targets"])[current().target]
    if version not in ("gen2", "gen3"):
        _isa("rand2")(dst=out, min=0.0, max=1.0)
        return out
    engine = _isa_module().ENUMS["engine"]["vector" if version == "gen2" else "gpsimd"]
    bits: Tile = nl.ndarray(out.shape, nl.uint16, buffer=nl.sbuf)
    _isa("rng")(dst=bits, engine=engine)
    _isa("tensor_scalar")(dst=out, data=bits, op0=nl.multiply, operand0=RAND_SCALE)
    return out


def dropout(x: Any, rate: Any, dtype: Any = None) -> Tile:
    """``x`` with each element zeroed with probability ``rate`` (a number or a ``(P, 1)`` tile),
    in ``dtype`` (default ``x``'s)."""
    nl = _nl()
    if not isinstance(x, TileRegion):
        raise TypeError(f"nl.dropout takes a tile, got {x!r} ({where()})")
    d = x.dtype if dtype is None else nl.as_dtype(dtype)
    kept: Tile = nl.ndarray(x.shape, x.dtype, buffer=nl.sbuf)
    _isa("dropout")(dst=kept, data=x, prob=rate)
    if d == x.dtype:
        return kept
    out: Tile = nl.ndarray(x.shape, d, buffer=nl.sbuf)
    _isa("tensor_copy")(dst=out, src=kept)
    return out

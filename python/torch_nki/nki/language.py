"""``nki.language`` (``nl``) as the torch-nki frontend implements it: element types, buffers,
``nl.ndarray``, loops, tile sizes, ``nl.load`` / ``nl.store``, ``nl.broadcast_to``, ``nl.ds``
and the operator and activation names ``nisa`` instructions take (every one NKI 0.7 declares, built
from the native declarations: ``FUNCTIONS``).

Loops follow NKI 0.6: ``affine_range``, ``sequential_range`` and ``static_range`` iterate like
``range`` (the kernel is unrolled while it is traced); each iteration is its own scope, and a
tile allocated in it lives as long as the kernel uses it (lists of tiles built in one loop and
read in the next are fine). Anything else in ``nl`` raises ``NotImplementedError``
naming the call and its line.
"""

from __future__ import annotations

import builtins
import dataclasses
import operator
from collections.abc import Iterator, Sequence
from contextlib import contextmanager, suppress
from typing import Any, ClassVar

import numpy as _np

from torch_nki._dtypes import KERNEL_DTYPES
from torch_nki.nki._elementwise import (
    cos as cos,
    is_hbm as is_hbm,
    is_on_chip as is_on_chip,
    is_psum as is_psum,
    is_sbuf as is_sbuf,
    logical_not as logical_not,
    tan as tan,
    where as where,
)
from torch_nki.nki._gather import gather_flattened as gather_flattened, load_transpose2d as load_transpose2d
from torch_nki.nki._grid import (
    num_programs as num_programs,
    program_id as program_id,
    program_ndim as program_ndim,
)
from torch_nki.nki._language_rest import (
    ceil as ceil,
    device_print as device_print,
    floor as floor,
    fmod as fmod,
    mod as mod,
    rms_norm as rms_norm,
    shared_constant as shared_constant,
    shared_identity_matrix as shared_identity_matrix,
    trunc as trunc,
)
from torch_nki.nki._random import dropout as dropout, rand as rand, random_seed as random_seed
from torch_nki.nki._registers import (
    dynamic_range as dynamic_range,
    fori_loop as fori_loop,
    while_loop as while_loop,
)
from torch_nki.nki._spec import SPEC
from torch_nki.nki._tile_ops import (
    all as all,
    empty_like as empty_like,
    expand_dims as expand_dims,
    full as full,
    matmul as matmul,
    max as max,
    mean as mean,
    min as min,
    negative as negative,
    ones as ones,
    prod as prod,
    softmax as softmax,
    sum as sum,
    transpose as transpose,
    var as var,
    zeros_like as zeros_like,
)
from torch_nki.nki._trace import NO_REORDER, active, current, location, unsupported, where as _at
from torch_nki.nki._values import DType, HbmTensor, HbmView, Tile, TileRegion, tile_shape

#: Every element type, from the kernel dtype table (:mod:`torch_nki._dtypes`).
DTYPES = tuple(DType(d.nki, d.name) for d in KERNEL_DTYPES)
_BY_NKI_NAME = {d.nki_name: d for d in DTYPES}

globals().update(_BY_NKI_NAME)

_PACKED_NAMES = {d["name"] for d in SPEC["dtypes"] if d["class"] == "packed"}
PACKED_DTYPES = tuple(d for d in DTYPES if d.nki_name in _PACKED_NAMES)
"""The packed MX dtypes (``nl.float8_e5m2_x4``, ``nl.float8_e4m3fn_x4``, ``nl.float4_e2m1fn_x4``):
four fp8 / fp4 values per element, the data of ``nisa.quantize_mx`` and ``nisa.nc_matmul_mx``.
Tiles and HBM tensors of them are moved by ``dma_copy`` only; at the torch boundary they are
bytes (:func:`torch_nki.nki.packed` passes an input, outputs come back as uint8)."""


class Buffer:
    """A memory ``nl.ndarray`` allocates in (``nl.sbuf``, ...): what a tensor's ``.buffer``
    is. It equals its name too (``t.buffer == "psum"``)."""

    def __init__(self, name: str) -> None:
        self.name = name

    def __repr__(self) -> str:
        return f"nl.{self.name}"

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Buffer):
            return self.name == other.name
        return isinstance(other, str) and other == self.name

    def __hash__(self) -> int:
        return hash(self.name)


class NKIObject:
    """``nl.NKIObject``: the base class of NKI kernel dataclasses and configuration objects.

    Its constructor is kept by every subclass that does not define its own, even under
    ``@dataclass`` (which only adds an ``__init__`` a class lacks): positional arguments fill
    the dataclass fields in order, keyword arguments become attributes whether or not they are
    fields (AWS's kernel library passes plain class attributes by keyword), fields not given
    take their default or ``default_factory`` (a field with neither stays unset), and
    ``__post_init__`` runs last. The docs do not describe the constructor; this is what AWS's
    kernels rely on."""

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if "__init__" not in cls.__dict__:
            cls.__init__ = NKIObject.__init__  # type: ignore[method-assign]

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        fields: list[dataclasses.Field[Any]] = (
            list(dataclasses.fields(self)) if dataclasses.is_dataclass(self) else []
        )
        if len(args) > len(fields):
            raise TypeError(
                f"{type(self).__name__}() takes {len(fields)} positional argument(s) (its dataclass "
                f"fields), got {len(args)}"
            )
        given = dict(zip((f.name for f in fields), args, strict=False))
        for name in kwargs.keys() & given.keys():
            raise TypeError(f"{type(self).__name__}() got multiple values for argument {name!r}")
        given.update(kwargs)
        for f in fields:
            if f.name in given:
                continue
            if f.default is not dataclasses.MISSING:
                given[f.name] = f.default
            elif f.default_factory is not dataclasses.MISSING:
                given[f.name] = f.default_factory()
        for name, value in given.items():
            object.__setattr__(self, name, value)
        post_init = getattr(self, "__post_init__", None)
        if post_init is not None:
            post_init()


@contextmanager
def no_reorder() -> Iterator[None]:
    """``with nl.no_reorder():`` keeps the instructions in the block in program order. The
    simulator and the cost model already take instructions in program order, so the block
    changes nothing here, except that a device loop (``nl.dynamic_range``, ``fori_loop``,
    ``while_loop``) inside it is a ``TypeError``, as NKI refuses it."""
    trace = active()
    if trace is None:
        yield
        return
    trace.scopes.append(NO_REORDER)
    try:
        yield
    finally:
        if trace.active and trace.scopes and trace.scopes[-1] == NO_REORDER:
            trace.scopes.pop()


sbuf = Buffer("sbuf")
psum = Buffer("psum")
private_hbm = Buffer("private_hbm")
shared_hbm = Buffer("shared_hbm")
hbm = private_hbm
"""``nl.hbm``: another name for ``nl.private_hbm`` (the declarations' ``alias_of``)."""
_BUFFERS_BY_NAME = {b.name: b for b in (sbuf, psum, private_hbm, shared_hbm)} | {"hbm": hbm}


class Function:
    """An ``nl`` operator or activation function (``nl.add``, ``nl.exp``) as ``nisa`` calls take
    it: its ``kinds`` say which it can be (``operator``, ``activation``, or both, as
    ``nl.reciprocal``). Calling it as a tile-level operation is not implemented."""

    def __init__(self, name: str, kinds: tuple[str, ...]) -> None:
        self.name = name
        self.kinds = kinds

    def __call__(self, x: Any, y: Any = None, dtype: Any = None) -> Tile:
        """The tile-level operation, lowered to one instruction as NKI lowers it: a binary
        operator on two tiles of one shape is ``nisa.tensor_tensor``, on a tile and a number
        ``nisa.tensor_scalar``; an activation function of a tile ``nisa.activation``, a unary
        operator that is no activation function (``nl.invert``) ``nisa.tensor_scalar`` with a 0
        operand. The
        result is a new SBUF tile of ``x``'s shape, in ``dtype`` (default: the inputs' dtype;
        float32 where two tiles' dtypes differ)."""
        return _tile_level(self, x, y, dtype)

    def __repr__(self) -> str:
        return f"nl.{self.name}"


def _tile_level(fn: Function, x: Any, y: Any, dtype: Any) -> Tile:
    from torch_nki.nki import isa

    call = f"nl.{fn.name}(...) as a tile-level call"
    if not isinstance(x, TileRegion):
        raise unsupported(
            call, f"on {type(x).__name__} (a tile first; pass it to a nisa instruction: op=nl.{fn.name})"
        )
    if y is None:
        out = _result(x, None, dtype)
        if "activation" in fn.kinds:
            isa.instruction("activation")(dst=out, op=fn, data=x)
        elif fn.name in _UNARY_OPERATORS:
            isa.instruction("tensor_scalar")(dst=out, data=x, op0=fn, operand0=0)
        else:
            raise TypeError(f"nl.{fn.name} takes two operands, got one ({location()[0]}:{location()[1]})")
        return out
    if "operator" not in fn.kinds:
        raise TypeError(
            f"nl.{fn.name} takes one tile, got a second argument ({location()[0]}:{location()[1]})"
        )
    if isinstance(y, TileRegion):
        if y.shape != x.shape:
            raise ValueError(
                f"nl.{fn.name}: shapes {x.shape} and {y.shape} differ; NKI's tile-level operators do not "
                f"broadcast (use nl.broadcast_to or nisa.tensor_scalar with a (P, 1) tile) "
                f"({location()[0]}:{location()[1]})"
            )
        out = _result(x, y, dtype)
        isa.instruction("tensor_tensor")(dst=out, data1=x, data2=y, op=fn)
        out.comparison = fn.name if fn.name in _COMPARISONS else None
        return out
    if isinstance(y, bool) or not isinstance(y, int | float):
        raise TypeError(
            f"nl.{fn.name}: y must be a tile or a number, got {y!r} ({location()[0]}:{location()[1]})"
        )
    out = _result(x, None, dtype)
    isa.instruction("tensor_scalar")(dst=out, data=x, op0=fn, operand0=float(y))
    out.comparison = fn.name if fn.name in _COMPARISONS else None
    return out


def _result(x: TileRegion, y: TileRegion | None, dtype: Any) -> Tile:
    if dtype is not None:
        d = as_dtype(dtype)
    elif y is None or y.dtype == x.dtype:
        d = x.dtype
    else:
        d = _BY_NKI_NAME["float32"]
    tile: Tile = ndarray(x.shape, d, buffer=sbuf)
    return tile


def _functions() -> dict[str, Function]:
    """Every operator and activation function NKI 0.7 declares, and those the simulator
    implements beyond them, with the kinds each can be."""
    kinds: dict[str, list[str]] = {}
    for table, kind in (
        ("operators", "operator"),
        ("implemented_operators", "operator"),
        ("activations", "activation"),
        ("implemented_activations", "activation"),
    ):
        for entry in SPEC[table]:
            name = entry if isinstance(entry, str) else entry["name"]
            if kind not in kinds.setdefault(name, []):
                kinds[name].append(kind)
    return {name: Function(name, tuple(k)) for name, k in kinds.items()}


_UNARY_OPERATORS = {o["name"] for o in SPEC["operators"] if o["arity"] == "unary"}
_COMPARISONS = {o["name"] for o in SPEC["operators"] if o["class"] == "comparison"}

FUNCTIONS: dict[str, Function] = _functions()
"""The ``nl`` operators and activation functions, by name."""
globals().update(FUNCTIONS)


class _TileSize:
    """``nl.tile_size``: the hardware limits (``nl.tile_size.pmax``, ...), as the native
    declarations give them (``nki_spec::language::tile_size``), for the NeuronCore of the
    kernel being traced (outside a kernel: of the default target, ``trn2`` unless
    ``torch_nki.nki.default_target`` or ``NEURON_PLATFORM_TARGET_OVERRIDE`` says otherwise)."""

    _VALUES: ClassVar[dict[str, dict[str, int]]] = {
        t["name"]: dict.fromkeys((v for _, v in SPEC["targets"]), t["value"]["fixed"])
        if "fixed" in t["value"]
        else dict(zip((v for _, v in SPEC["targets"]), t["value"]["per_target"], strict=True))
        for t in SPEC["tile_sizes"]
    }
    _VERSIONS: ClassVar[dict[str, str]] = dict(SPEC["targets"])

    def __getattr__(self, name: str) -> int:
        values = _TileSize._VALUES.get(name)
        if values is None:
            raise AttributeError(f"nl.tile_size has no attribute '{name}' (NKI 0.7 has no tile_size.{name})")
        trace = active()
        if trace is None:
            from torch_nki.nki import unpinned_target

            return values[_TileSize._VERSIONS[unpinned_target()]]
        return values[_TileSize._VERSIONS[trace.target]]

    def __dir__(self) -> list[str]:
        return sorted(_TileSize._VALUES)

    def __repr__(self) -> str:
        return "nl.tile_size"


tile_size = _TileSize()


def as_dtype(dtype: Any) -> DType:
    """An ``nl`` dtype from an ``nl`` dtype, a NumPy / torch dtype or its name."""
    if isinstance(dtype, DType):
        return dtype
    given = dtype
    if isinstance(dtype, type):
        # A NumPy scalar type (``np.float32``, ``ml_dtypes.bfloat16``) names its dtype.
        with suppress(TypeError):
            dtype = _np.dtype(dtype)
    text = str(getattr(dtype, "name", dtype)).removeprefix("torch.")
    text = {"float": "float32", "half": "float16"}.get(text, text)
    for d, k in zip(DTYPES, KERNEL_DTYPES, strict=True):
        if text in (d.nki_name, d.native, k.torch_name):
            return d
    raise TypeError(f"torch_nki.nki: dtype {given!r} is not an NKI dtype (known: {list(DTYPES)})")


def ndarray(
    shape: Sequence[int],
    dtype: Any,
    buffer: Buffer = sbuf,
    name: str = "",
    address: tuple[int, int] | None = None,
    **kwargs: Any,
) -> Any:
    """A tile in ``nl.sbuf`` / ``nl.psum``, a tensor in ``nl.shared_hbm`` (an output, or scratch
    every program sees if the kernel does not return it), or scratch in ``nl.private_hbm``
    (``nl.hbm``) that only this program sees (zeroed for each call in the simulator).
    ``address=(partition_offset, free_offset)`` places an on-chip tile by hand: it is checked
    against the buffer's bounds, and the simulator then allocates the tile as any other (see
    docs/nki-frontend.md, "Explicit addresses")."""
    if kwargs:
        raise unsupported("nl.ndarray", f"keyword(s) {sorted(kwargs)}")
    trace = current()
    file, line = location(2)
    d = as_dtype(dtype)
    shape = _checked_shape("nl.ndarray", shape)
    if isinstance(buffer, str):
        buffer = _BUFFERS_BY_NAME.get(buffer, buffer)
    if address is not None:
        _check_address(address, shape, d, buffer)
    if buffer is shared_hbm:
        index = trace.native.output(list(shape), d.native, file, line)
        outputs = len(trace.outputs)
        tensor = HbmTensor(index, name or f"out{outputs}", shape, d, trace)
        trace.outputs.append(tensor)
        return tensor
    if buffer is private_hbm:
        index = trace.native.scratch(list(shape), d.native, file, line)
        name = name or f"scratch{len(trace.scratch)}"
        scratch = HbmTensor(index, name, shape, d, trace, memory=private_hbm.name)
        trace.scratch.append(scratch)
        return scratch
    if buffer not in (sbuf, psum):
        raise TypeError(
            f"nl.ndarray: buffer must be nl.sbuf, nl.psum, nl.private_hbm (nl.hbm) or nl.shared_hbm, "
            f"got {buffer!r} ({_at()})"
        )
    p, f = tile_shape(shape)
    placed = None if address is None else (int(address[0]), int(address[1]))
    tile_id = trace.native.tile(p, f, d.native, buffer.name, file, line, placed)
    return Tile(tile_id, shape if len(shape) > 1 else (p, f), d, buffer.name, trace)


_MAX_DIM = 2**63 - 1
"""The largest dimension the native side takes (an ``i64``)."""


def _checked_shape(fn: str, shape: Any) -> tuple[int, ...]:
    """``shape`` as a tuple of ints, each from 0 to 2**63 - 1; a ``TypeError`` / ``ValueError``
    naming ``fn``, the shape and the line otherwise."""
    try:
        dims: tuple[Any, ...] = tuple(shape)
    except TypeError:
        raise TypeError(f"{fn}: shape must be a tuple of ints, got {shape!r} ({_at()})") from None
    values = []
    for dim in dims:
        try:
            value = operator.index(dim)
        except TypeError:
            value = None
        if isinstance(dim, bool) or value is None:
            raise TypeError(f"{fn}: shape {dims!r} has {dim!r}, not an int ({_at()})")
        if not 0 <= value <= _MAX_DIM:
            raise ValueError(
                f"{fn}: shape {dims!r} has dimension {value}; each must be from 0 to 2**63 - 1 ({_at()})"
            )
        values.append(value)
    return tuple(values)


def _check_address(address: Any, shape: tuple[int, ...], dtype: DType, buffer: Buffer) -> None:
    """``nl.ndarray(address=...)``: a ``(partition_offset, free_offset)`` pair of non-negative
    ints, on chip, that keeps the tile inside the buffer (its partitions below ``pmax``, its
    bytes per partition within the buffer's partition)."""
    at = f"nl.ndarray(address={address!r}) ({_at()})"
    if buffer not in (sbuf, psum):
        raise ValueError(f"{at}: only an on-chip tile (nl.sbuf, nl.psum) takes an address, not {buffer!r}")
    if (
        not isinstance(address, tuple | list)
        or len(address) != 2
        or not builtins.all(isinstance(a, int) and not isinstance(a, bool) and a >= 0 for a in address)
    ):
        raise TypeError(f"{at}: expected (partition_offset, free_offset), two non-negative ints")
    partition, offset = address
    p, f = tile_shape(shape)
    if partition + p > tile_size.pmax:
        raise ValueError(
            f"{at}: partitions {partition}..{partition + p} run past the {tile_size.pmax} partitions"
        )
    capacity = (
        tile_size.sbuf_fmax_bytes
        if buffer is sbuf
        else tile_size.psum_bank_fmax_bytes * tile_size.psum_num_banks
    )
    end = offset + f * dtype.itemsize
    if end > capacity:
        raise ValueError(
            f"{at}: bytes {offset}..{end} of each partition run past the {capacity} bytes of "
            f"{buffer!r}'s partition"
        )


def zeros(shape: Sequence[int], dtype: Any, buffer: Buffer = sbuf, name: str = "") -> Tile:
    """A tile filled with zeros (``nl.ndarray`` then ``nisa.memset``)."""
    from torch_nki.nki import isa

    if buffer is shared_hbm:
        raise unsupported("nl.zeros(buffer=nl.shared_hbm)")
    tile: Tile = ndarray(shape, dtype, buffer=buffer, name=name)
    isa.instruction("memset")(dst=tile, value=0.0)
    return tile


def _scoped(kind: str, args: tuple[int, ...]) -> Iterator[int]:
    trace = current()
    file, line = location()
    # Every iteration is a scope of its own; the invocation number keeps the iterations of
    # two loops opened back to back at one line (in a Python ``for``) two loops.
    trace.loop_invocations += 1
    invocation = trace.loop_invocations
    for i in range(*args):
        trace.native.open_loop(1, kind, file, line, invocation)
        trace.scopes.append(kind)
        try:
            yield i
        finally:
            if trace.active:
                trace.scopes.pop()
                trace.native.close_loop()


def _range_args(start: int, stop: int | None, step: int) -> tuple[int, ...]:
    """NKI's ``(start, stop=None, step=1)`` as ``range``'s arguments (``stop`` ``None``:
    ``range(start)``)."""
    return (
        (start,)
        if stop is None and step == 1
        else (0 if stop is None else start, start if stop is None else stop, step)
    )


def affine_range(start: int, stop: int | None = None, step: int = 1) -> Iterator[int]:
    """``range`` whose iterations are independent (each iteration is its own scope)."""
    return _scoped("affine", _range_args(start, stop, step))


def sequential_range(start: int, stop: int | None = None, step: int = 1) -> Iterator[int]:
    """``range`` whose iterations run in order and may carry state through tiles."""
    return _scoped("sequential", _range_args(start, stop, step))


def static_range(start: int, stop: int | None = None, step: int = 1) -> Iterator[int]:
    """``range``, unrolled (as every NKI 0.6 loop is)."""
    return _scoped("sequential", _range_args(start, stop, step))


def ds(start: int, size: int) -> slice:
    """``nl.ds(start, size)``: the slice ``start:start + size``."""
    return slice(start, start + size)


def load(src: HbmView, dtype: Any = None, **kwargs: Any) -> Tile:
    """Copies an HBM view into a new SBUF tile of its shape (``nisa.dma_copy``), in ``dtype``
    if given (the DMA converts through fp32, as NKI's DMA engines do)."""
    from torch_nki.nki import isa

    if kwargs:
        raise unsupported("nl.load", f"keyword(s) {sorted(kwargs)}")
    if not isinstance(src, HbmView):
        raise TypeError(f"nl.load takes an HBM tensor or view, got {src!r}")
    shape = src.shape if len(src.shape) > 1 else src.tile_shape()
    tile: Tile = ndarray(shape, src.dtype if dtype is None else as_dtype(dtype), buffer=sbuf)
    isa.instruction("dma_copy")(dst=tile, src=src)
    return tile


def store(dst: HbmView, value: TileRegion, **kwargs: Any) -> None:
    """Copies an SBUF tile into an HBM view (``nisa.dma_copy``); PSUM tiles go through
    ``nisa.tensor_copy`` first."""
    from torch_nki.nki import isa

    if kwargs:
        raise unsupported("nl.store", f"keyword(s) {sorted(kwargs)}")
    if isinstance(value, TileRegion) and value.buffer == "psum":
        raise TypeError(
            f"nl.store does not take PSUM tiles ({location(2)[0]}:{location(2)[1]}); "
            "copy to SBUF with nisa.tensor_copy first"
        )
    isa.instruction("dma_copy")(dst=dst, src=value)


def broadcast_to(x: Any, shape: Sequence[int], dtype: Any = None) -> Any:
    """``x`` broadcast to ``shape`` (NumPy's rules: new leading and size-1 dims repeat). An HBM
    view and a tile's free dims broadcast as views (stride 0, nothing copied); a one-partition
    tile broadcast over partitions is copied into a new tile by one ``nisa.dma_copy`` that
    reads the partition once per destination row (the engines read partitions contiguously;
    the NKI docs do not say which instruction NKI uses); ``dtype`` casts into a new tile."""
    from torch_nki.nki import isa

    if isinstance(x, HbmView):
        return x.broadcast_to(shape)
    if not isinstance(x, TileRegion):
        raise TypeError(f"nl.broadcast_to takes a tile or an HBM tensor, got {x!r} ({_at()})")
    shape = [int(s) for s in shape]
    if len(shape) != len(x.shape):
        raise ValueError(
            f"nl.broadcast_to: shape {tuple(shape)} must have the rank of the {x.shape} tile ({_at()})"
        )
    out_dtype = x.dtype if dtype is None else as_dtype(dtype)
    if shape[0] == x.np:
        view = x.broadcast_to(shape)
        if out_dtype == x.dtype:
            return view
        out = ndarray(tuple(shape), out_dtype, buffer=sbuf)
        isa.instruction("tensor_copy")(dst=out, src=view)
        return out
    if x.np != 1:
        raise ValueError(
            f"nl.broadcast_to: the partition dim of a {x.shape} tile can only broadcast from 1, "
            f"not to {shape[0]} ({_at()})"
        )
    out = ndarray(tuple(shape), out_dtype, buffer=sbuf)
    src = x.broadcast_to([1, *shape[1:]]).partition_broadcast(shape[0])
    isa.instruction("dma_copy")(dst=out, src=src)
    return out


def __getattr__(name: str) -> Any:
    if name.startswith("__"):
        raise AttributeError(name)
    raise unsupported(f"nl.{name}")

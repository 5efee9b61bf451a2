"""``nki.isa`` (``nisa``) as the torch-nki frontend implements it, built from the instruction
declarations of the native module (``nki_spec``, the NKI 0.7 instruction set declared once in
Rust): every instruction of NKI 0.7 is here with its keyword signature (order and defaults, as
``inspect.signature`` shows), and every ``nisa`` enum (``engine``, ``reduce_cmd``,
``dge_mode``, ``oob_mode``, ``matmul_perf_mode``, ``nc_version``, ``dma_engine``, also under
``nki.isa.constants``).

A call binds its arguments to the signature (a wrong keyword is a ``TypeError``, as in NKI),
encodes each value the same way for every instruction and records one instruction through the
native tracer, which checks each value against its declared kind and runs the same checks as a
Rust kernel, with the calling line as its location (``register_alloc`` returns the
``VirtualRegister`` it allocates; a one-element tensor as its value is ``register_alloc()`` then
``register_load``). An instruction the frontend does not
implement yet, or a keyword value it does not implement, raises ``NotImplementedError`` naming
the call and the line; docs/nki-coverage.md lists what is implemented.
"""

from __future__ import annotations

import contextlib
import enum
import inspect
import math
import types
from collections.abc import Callable
from typing import Any

from torch_nki.nki import _reinterpret, _views, language
from torch_nki.nki._inplace import WRITE_KINDS, make_writable
from torch_nki.nki._registers import VirtualRegister as VirtualRegister
from torch_nki.nki._spec import SPEC
from torch_nki.nki._trace import current, location, unsupported, where
from torch_nki.nki._values import HbmView, TileRegion

INSTRUCTIONS: dict[str, dict[str, Any]] = {i["name"]: i for i in SPEC["instructions"]}
"""Every ``nki.isa`` instruction's declaration, by name (what the native module exports)."""


def _enum_class(declared: dict[str, Any]) -> type[enum.Enum]:
    """The class of a declared enum: an ``IntEnum`` where every value is an int (so
    ``nisa.get_nc_version() >= 3`` and ``>= nisa.nc_version.gen3`` work, as AWS's kernel library
    writes them), else an ``Enum``."""
    members = [(v["name"], v["value"]) for v in declared["variants"]]
    ints = all(isinstance(value, int) for _, value in members)
    base = enum.IntEnum if ints else enum.Enum
    return base(declared["name"], members, module=__name__)  # type: ignore[call-arg, return-value]


ENUMS: dict[str, type[enum.Enum]] = {e["name"]: _enum_class(e) for e in SPEC["enums"]}
"""Every ``nki.isa`` enum class, by name."""

globals().update(ENUMS)

# NKI 0.7 keeps five of the engines' old constants (`nisa.scalar_engine`, deprecated for
# `nisa.engine.scalar`; the API stub's `nki/isa/__init__.py` lists them).
ENGINE_CONSTANTS: dict[str, enum.Enum] = {
    f"{name}_engine": ENUMS["engine"][name] for name in ("tensor", "vector", "scalar", "gpsimd", "unknown")
}
"""``nisa.tensor_engine``, ``nisa.vector_engine``, ... (deprecated aliases of ``nisa.engine.*``)."""
globals().update(ENGINE_CONSTANTS)

constants = types.ModuleType(f"{__name__}.constants", "The nki.isa enums (nki.isa.constants).")
for _name, _enum in ENUMS.items():
    setattr(constants, _name, _enum)


_PLAIN = frozenset({int, float, bool, str, type(None)})

_ENUM_TYPES = frozenset(ENUMS.values())


def _encode(value: Any) -> Any:
    """The uniform native encoding of one argument (see the native ``args`` module)."""
    kind = type(value)
    if kind in _PLAIN:
        return value
    if kind in _ENUM_TYPES:
        return ("enum", kind.__name__, value.name)
    if isinstance(value, TileRegion):
        # The region, its shape (for instructions that see its dims, dma_transpose), its walk.
        return value.operand()
    if isinstance(value, HbmView):
        return value.operand()
    if isinstance(value, VirtualRegister):
        return value.operand()
    if isinstance(value, language.Function):
        return ("fn", value.name, "|".join(value.kinds))
    if isinstance(value, list | tuple):
        return [_encode(v) for v in value]
    return value


def _default(param: dict[str, Any]) -> Any:
    kind = param["default"]
    if kind == "required":
        return inspect.Parameter.empty
    if kind == "enum":
        enum_name, variant = param["value"]
        return ENUMS[enum_name][variant]
    if kind == "operator":
        return language.FUNCTIONS[param["value"]]
    if kind == "empty_tuple":
        return ()
    if kind == "ellipsis":
        return ...
    return None if kind == "none" else param["value"]


def _signature(spec: dict[str, Any]) -> inspect.Signature:
    return inspect.Signature(
        [
            inspect.Parameter(p["name"], inspect.Parameter.POSITIONAL_OR_KEYWORD, default=_default(p))
            for p in spec["params"]
        ]
    )


class _Binder:
    """Binds a call's arguments to an instruction's signature (every parameter positional or
    keyword) with its defaults applied: what ``inspect.Signature.bind`` then ``apply_defaults``
    do, with the same ``TypeError`` messages, at a fraction of their cost — a kernel's loop of a
    million small instructions binds a million times."""

    def __init__(self, signature: inspect.Signature) -> None:
        self.signature = signature
        self.names = tuple(signature.parameters)
        self.defaults = {n: p.default for n, p in signature.parameters.items()}

    def bind(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> dict[str, Any]:
        """The arguments by name, in declaration order, defaults filled in."""
        names, defaults = self.names, self.defaults
        if len(args) > len(names):
            return self._slow(args, kwargs)
        for key in kwargs:
            if key not in defaults:
                return self._slow(args, kwargs)
        arguments: dict[str, Any] = {}
        for i, name in enumerate(names):
            if i < len(args):
                if name in kwargs:
                    return self._slow(args, kwargs)
                arguments[name] = args[i]
            elif name in kwargs:
                arguments[name] = kwargs[name]
            else:
                default = defaults[name]
                if default is inspect.Parameter.empty:
                    return self._slow(args, kwargs)
                arguments[name] = default
        return arguments

    def _slow(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> dict[str, Any]:
        """``inspect``'s binding, for the calls the fast path does not bind: it raises the
        ``TypeError`` that names what is wrong."""
        bound = self.signature.bind(*args, **kwargs)
        bound.apply_defaults()
        return dict(bound.arguments)


def _doc(spec: dict[str, Any]) -> str:
    status = spec["status"]
    engines = ", ".join(spec["engines"]) or "none"
    since = spec["targets"]["since"]
    note = {
        "implemented": "Implemented.",
        "planned": "Not implemented yet: calling it raises NotImplementedError.",
    }.get(status, f"Not applicable: {spec.get('note')}")
    return f"{spec['summary']}\n\nEngines: {engines}. NeuronCore {since} and newer. {note}"


def _flatten_axis(name: str, arguments: dict[str, Any]) -> None:
    """Tiles reach the simulator as ``[partitions, free elements]``: an ``axis=`` over a tile
    with several free dimensions must name all of them, which is axis 1 of that view — or, for
    ``tensor_reduce``, its last dims (``axis=(2,)`` of a ``(P, A, B)`` tile): the destination's
    ``A`` elements per partition then each reduce one consecutive group of ``B``."""
    if "axis" not in arguments:
        return
    operands = [arguments["data"]] if name == "tensor_reduce" else arguments.values()
    tiles = [v for v in operands if isinstance(v, TileRegion) and len(v.free) > 1]
    if not tiles:
        return
    rank = len(tiles[0].shape)
    axis = arguments["axis"]
    axes = sorted(a + rank if a < 0 else a for a in ([axis] if isinstance(axis, int) else axis))
    trailing = bool(axes) and axes == list(range(axes[0], rank)) and axes[0] >= 1
    if axes != list(range(1, rank)) and not (name == "tensor_reduce" and trailing):
        raise unsupported(
            f"nisa.{name}(axis={axis!r}) on a {tiles[0].shape} tile",
            "the reduction runs over all free dimensions of an instruction's operand "
            f"(axis={tuple(range(1, rank))}); index the tile to reduce fewer",
        )
    if name == "tensor_reduce":
        kept = math.prod(tiles[0].shape[1 : axes[0]])
        dst = arguments["dst"]
        per_partition = math.prod(dst.shape[1:]) if isinstance(dst, TileRegion | HbmView) else kept
        if per_partition != kept:
            raise ValueError(
                f"nisa.tensor_reduce: axis={axis!r} of a {tiles[0].shape} data tile keeps {kept} "
                f"element(s) per partition, but dst {tuple(dst.shape)} has {per_partition} "
                f"({where()})"
            )
    arguments["axis"] = 1


def _enum_members(arguments: dict[str, Any], enums: dict[str, type[enum.Enum]]) -> None:
    """An int or a string given for an enum keyword names the member of that value
    (``dge_mode=3`` is ``nisa.dge_mode.none``, ``perf_mode="double_row"`` is
    ``nisa.matmul_perf_mode.double_row``: AWS's kernel library passes values); other values are
    left for the native check to refuse."""
    for param, of in enums.items():
        value = arguments.get(param)
        if isinstance(value, int | str) and not isinstance(value, bool | enum.Enum):
            with contextlib.suppress(ValueError):
                arguments[param] = of(value)


def _match_dma_shapes(arguments: dict[str, Any]) -> None:
    """``dma_copy`` needs only equal element counts (the NKI docs' "Tile size" rule), copying
    in row-major order: where the shapes differ, the HBM side is seen with the other side's
    shape when its strides allow it (a copy between a ``(64,)`` HBM slice and a ``(64, 1)``
    tile); otherwise the shapes stay, and the native check names them."""
    dst, src = arguments["dst"], arguments["src"]
    if not isinstance(dst, HbmView | TileRegion) or not isinstance(src, HbmView | TileRegion):
        return
    if tuple(dst.shape) == tuple(src.shape) or math.prod(dst.shape) != math.prod(src.shape):
        return
    for side, other in (("src", dst), ("dst", src)):
        view = arguments[side]
        if isinstance(view, HbmView) and not view.is_indirect():
            dims = _views.reshape(view.dims, other.shape)
            if dims is not None:
                arguments[side] = HbmView(view.tensor, view.offset, dims)
                return


def _instruction(spec: dict[str, Any]) -> Callable[..., Any]:
    name = spec["name"]
    signature = _signature(spec)
    implemented = spec["status"] == "implemented"
    written = [p["name"] for p in spec["params"] if p["kind"] in WRITE_KINDS]
    enums = {p["name"]: ENUMS[p["of"]] for p in spec["params"] if p["kind"] == "enum"}
    reads_destination = frozenset(SPEC["reads_destination"].get(name, ()))

    binder = _Binder(signature)

    def call(*args: Any, **kwargs: Any) -> Any:
        try:
            arguments = binder.bind(args, kwargs)
        except TypeError as e:
            file, line = location()
            raise TypeError(f"nisa.{name}: {e} ({file}:{line})") from None
        if not implemented:
            raise unsupported(f"nisa.{name}", "not implemented yet (docs/nki-coverage.md)")
        if name == "register_alloc" and isinstance(arguments["x"], TileRegion | HbmView):
            # A one-element tensor as the initial value (AWS's kernels write it): the register,
            # then register_load from it.
            reg = call()
            FUNCTIONS["register_load"](reg, arguments["x"])
            return reg
        _flatten_axis(name, arguments)
        if enums:
            _enum_members(arguments, enums)
        if name == "dma_copy":
            _match_dma_shapes(arguments)
        for param in written:
            make_writable(arguments[param], FUNCTIONS["dma_copy"])
        trace = current()
        views = _reinterpret.views_of(arguments) if trace.reinterpreting else ()
        for param, view, base in views:
            if param not in written or param in reads_destination or not view.exact:
                _reinterpret.sync(view.side, base)
        values = {k: _encode(v) for k, v in arguments.items()}
        result = trace.native.record(name, values, *location())
        for param, view, base in views:
            if param in written:
                make_writable(base, FUNCTIONS["dma_copy"])
                _reinterpret.sync(base, view.side)
        return None if result is None else VirtualRegister(trace, result)

    call.__name__ = call.__qualname__ = name
    call.__doc__ = _doc(spec)
    call.__signature__ = signature  # type: ignore[attr-defined]
    call.__module__ = __name__
    return call


FUNCTIONS: dict[str, Callable[..., Any]] = {spec["name"]: _instruction(spec) for spec in SPEC["instructions"]}
"""Every ``nisa.<name>`` function, by name (also this module's attributes)."""
globals().update(FUNCTIONS)


def instruction(name: str) -> Callable[..., Any]:
    """The ``nisa.<name>`` function (for calls from within the frontend)."""
    return FUNCTIONS[name]


_NC_VERSIONS: dict[str, str] = dict(SPEC["targets"])
"""The ``nisa.nc_version`` of each target (``trn2`` → ``gen3``)."""


def get_nc_version() -> Any:
    """The NeuronCore version of the kernel being traced (``nisa.nc_version``)."""
    return ENUMS["nc_version"][_NC_VERSIONS[current().target]]


def __getattr__(name: str) -> Any:
    if name.startswith("__"):
        raise AttributeError(name)
    raise AttributeError(f"module 'nki.isa' has no attribute '{name}' (NKI 0.7 has no nisa.{name})")

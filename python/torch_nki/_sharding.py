"""Sharding rules for every op, from the dimension semantics Rust derives from its contract.

The manifest's ``sharding`` section says, for every dimension symbol of a kernel, whether it is
*independent* (kept by the outputs that depend on it), *summed* (contracted away: a split gives
partial sums), *mixed* (kept by some outputs, summed by others) or *whole* (never split), with
each output's role, the symbols split together and the inputs added once (see
``nki_contract::sharding`` and docs/distributed.md). This module turns that into the concrete
strategies of one call (:func:`strategies`): for its actual shapes and scalars, which
placements of the inputs each output placement goes with, on one mesh dimension. Nothing here
is specific to an op, and nothing depends on ``torch.distributed``: placements are plain
tuples (``("shard", axis)``, ``("replicate",)``, ``("partial",)``), which
:mod:`torch_nki.distributed` maps to DTensor's.

A split is offered only if every device's local shapes satisfy the contract (a shard may be
too small for a ``require``, or empty); symbols split together need even shards. Splitting the
whole mesh's devices along one dimension is the worst case, so that is what is checked: on a
mesh of ``n`` devices, chunks of ``ceil(size / n)`` as ``torch.chunk`` makes them.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from torch_nki._manifest import OpSpec

Placement = tuple[Any, ...]
"""``("shard", axis)``, ``("replicate",)`` or ``("partial",)``; ``None`` for a non-tensor."""

REPLICATE: Placement = ("replicate",)
PARTIAL: Placement = ("partial",)


@dataclass(frozen=True)
class OutputUse:
    """What splitting a symbol does to one output: ``kept`` (split the same way), ``summed``
    (partial sums) or ``unused`` (the same on every device); ``cases`` for an output whose
    shape a string parameter chooses (``((values, role), ...)``)."""

    output: str
    role: str
    cases: tuple[tuple[tuple[str, ...], str], ...] = ()

    def role_for(self, scalars: dict[str, Any], param: str | None) -> str:
        """The role for a call whose string parameter ``param`` has its value in ``scalars``."""
        if param is not None:
            value = scalars.get(param)
            for values, role in self.cases:
                if value in values:
                    return role
        return self.role


@dataclass(frozen=True)
class DimRule:
    """One dimension symbol's semantics (the manifest's ``sharding.dims`` entry)."""

    symbol: str
    sequence: bool
    kind: str
    """``independent``, ``summed``, ``mixed`` or ``whole``."""
    reason: str
    whole_when: tuple[dict[str, Any], ...]
    """Conditions on scalars under which it is whole too (``{"kind": "flag", ...}``)."""
    together: tuple[str, ...]
    """Symbols split with it."""
    outputs: tuple[OutputUse, ...]

    def whole_for(self, scalars: dict[str, Any]) -> bool:
        """Whether a call with these scalar values must not split it."""
        return self.kind == "whole" or any(holds(c, scalars) for c in self.whole_when)


@dataclass(frozen=True)
class OpSharding:
    """An op's sharding semantics, parsed from the manifest."""

    op: str
    dims: tuple[DimRule, ...]
    additive: tuple[str, ...]
    reads: tuple[tuple[str, tuple[str, ...]], ...]

    def dim(self, symbol: str) -> DimRule:
        """The rule of ``symbol``."""
        return next(d for d in self.dims if d.symbol == symbol)


def holds(cond: dict[str, Any], scalars: dict[str, Any]) -> bool:
    """Whether a ``whole(...) if`` condition holds for these scalar values."""
    value = scalars.get(cond["param"])
    if cond["kind"] == "flag":
        return bool(value) == bool(cond["value"])
    return (value in cond["values"]) == bool(cond["equal"])


def condition_text(cond: dict[str, Any]) -> str:
    """``causal``, ``!causal``, ``reduction == "mean"``."""
    if cond["kind"] == "flag":
        return ("" if cond["value"] else "!") + str(cond["param"])
    op = "==" if cond["equal"] else "!="
    return f"{cond['param']} {op} " + " | ".join(f'"{v}"' for v in cond["values"])


def parse(spec: OpSpec, raw: dict[str, Any]) -> OpSharding:
    """The ``sharding`` entry of ``spec``'s manifest record."""
    dims = tuple(
        DimRule(
            symbol=d["symbol"],
            sequence=bool(d["sequence"]),
            kind=d["kind"],
            reason=d["reason"],
            whole_when=tuple(d.get("whole_when", ())),
            together=tuple(d.get("with", ())),
            outputs=tuple(
                OutputUse(
                    o["output"],
                    o["role"],
                    tuple((tuple(c["values"]), c["role"]) for c in o.get("cases", ())),
                )
                for o in d["outputs"]
            ),
        )
        for d in raw["dims"]
    )
    return OpSharding(
        op=spec.name,
        dims=dims,
        additive=tuple(raw["additive"]),
        reads=tuple((name, tuple(inputs)) for name, inputs in raw["reads"]),
    )


Unit = tuple[str, int]
"""One tensor dimension a symbol stands for: ``(symbol, k)``, ``k`` the index inside a
``..S`` sequence (0 for a single dimension)."""


def _axes(pattern: Sequence[dict[str, Any]], rank: int, seq_len: dict[str, int]) -> dict[Unit, int]:
    """Which axis of a tensor of ``rank`` each symbol unit is, for an input pattern or output
    shape (``seq_len`` gets the length of the pattern's sequence)."""
    fixed = len(pattern) - sum(1 for d in pattern if d["kind"] == "rest")
    axes: dict[Unit, int] = {}
    axis = 0
    for d in pattern:
        if d["kind"] == "rest":
            n = seq_len.setdefault(d["name"], rank - fixed)
            for k in range(n):
                axes[(d["name"], k)] = axis + k
            axis += n
            continue
        name = d.get("name") if d["kind"] == "sym" else None
        expr = d.get("expr")
        if expr is not None and expr.get("kind") == "sym":
            name = expr["name"]
        if name is not None:
            axes.setdefault((name, 0), axis)
        axis += 1
    return axes


def _output_shape(out: dict[str, Any], scalars: dict[str, Any]) -> list[dict[str, Any]]:
    shape: list[dict[str, Any]] = out["shape"]
    match = out.get("by_choice")
    if match:
        value = scalars.get(match["param"])
        for case in match["cases"]:
            if value in case["values"]:
                return list(case["shape"])
    return shape


def _chunks(size: int, n: int) -> list[int]:
    """Each device's share of ``size`` split in ``n`` (``torch.chunk``'s sizes, then empties)."""
    chunk = -(-size // n) if size else 0
    return [max(0, min(size, (r + 1) * chunk) - r * chunk) for r in range(n)]


@dataclass(frozen=True)
class Strategy:
    """One acceptable sharding on a mesh dimension: each output's and each argument's
    placement (``None`` for non-tensor arguments and absent optional tensors)."""

    outputs: tuple[Placement, ...]
    inputs: tuple[Placement | None, ...]
    split: tuple[Unit, ...]
    """The symbol units split (empty: everything replicated)."""


def strategies(
    spec: OpSpec,
    rules: OpSharding,
    values: Sequence[Any],
    shape_of: Callable[[Any], tuple[int, ...] | None],
    devices: int,
    accepts: Callable[[list[tuple[int, ...] | None]], bool],
) -> list[Strategy]:
    """Every strategy of one call on a mesh dimension: all-replicated first, then one per
    symbol (unit) the call may split. ``values`` are the call's arguments in parameter order
    (defaults filled in), ``shape_of(value)`` a tensor argument's global shape (``None`` for an
    absent optional tensor), ``devices`` the number of devices a dimension may be split over
    and ``accepts(shapes)`` whether the contract takes these local input shapes."""
    params = spec.params
    scalars = {p.name: v for p, v in zip(params, values, strict=True) if not p.is_tensor}
    inputs = {i["param"]: i["dims"] for i in spec.contract["inputs"]}
    seq_len: dict[str, int] = {}
    in_axes: dict[str, dict[Unit, int]] = {}
    shapes: dict[str, tuple[int, ...]] = {}
    for p, v in zip(params, values, strict=True):
        if p.is_tensor:
            shape = shape_of(v)
            if shape is not None:
                shapes[p.name] = shape
                in_axes[p.name] = _axes(inputs[p.name], len(shape), seq_len)
    size: dict[Unit, int] = {}
    for name, axes in in_axes.items():
        for unit, axis in axes.items():
            size.setdefault(unit, shapes[name][axis])
    outputs = spec.contract["outputs"]
    out_axes = [_axes(_output_shape(o, scalars), 0, dict(seq_len)) for o in outputs]
    n_args = len(values)

    result = [
        Strategy(
            outputs=tuple(REPLICATE for _ in outputs),
            inputs=tuple(REPLICATE if p.is_tensor and p.name in shapes else None for p in params)[:n_args],
            split=(),
        )
    ]
    seen: set[frozenset[Unit]] = set()
    for rule in rules.dims:
        if rule.whole_for(scalars):
            continue
        members = (rule.symbol, *rule.together)
        if any(rules.dim(m).whole_for(scalars) for m in members):
            continue
        candidates: list[list[Unit]] = []
        if rule.together:
            units: list[Unit] = []
            ok = True
            for m in members:
                n = seq_len.get(m, 1) if rules.dim(m).sequence else 1
                if n > 1:
                    ok = False  # a sequence of several dimensions cannot follow one symbol
                units += [(m, 0)] if n == 1 and (m, 0) in size else []
            if ok and units:
                candidates.append(units)
        else:
            candidates += [[u] for u in size if u[0] == rule.symbol]
        for split in candidates:
            key = frozenset(split)
            if key in seen:
                continue
            seen.add(key)
            strategy = _strategy(spec, rules, rule, split, scalars, shapes, in_axes, out_axes, n_args)
            if strategy is None:
                continue
            if any(size[u] < devices for u in split):
                continue  # an empty shard: DTensor does not shard a dimension that small
            if len(split) > 1 and any(size[u] % devices for u in split):
                continue  # symbols split together need even shards
            if not _locally_valid(spec, split, size, shapes, in_axes, devices, accepts):
                continue
            result.append(strategy)
    return result


def _strategy(
    spec: OpSpec,
    rules: OpSharding,
    rule: DimRule,
    split: list[Unit],
    scalars: dict[str, Any],
    shapes: dict[str, tuple[int, ...]],
    in_axes: dict[str, dict[Unit, int]],
    out_axes: list[dict[Unit, int]],
    n_args: int,
) -> Strategy | None:
    outs: list[Placement] = []
    choice = next((o["by_choice"]["param"] for o in spec.contract["outputs"] if o.get("by_choice")), None)
    for use, axes in zip(rule.outputs, out_axes, strict=True):
        kept = [axes[u] for u in split if u in axes]
        role = use.role_for(scalars, choice)
        if kept:
            outs.append(("shard", kept[0]))
        elif role == "kept":
            return None  # the output's shape does not have the unit after all
        elif role == "summed":
            outs.append(PARTIAL)
        else:
            outs.append(REPLICATE)
    partial = PARTIAL in outs
    ins: list[Placement | None] = []
    for p in spec.params[:n_args]:
        if not p.is_tensor or p.name not in shapes:
            ins.append(None)
            continue
        found = [in_axes[p.name][u] for u in split if u in in_axes[p.name]]
        if len(found) > 1:
            return None
        if found:
            ins.append(("shard", found[0]))
        elif partial and p.name in rules.additive:
            ins.append(PARTIAL)
        else:
            ins.append(REPLICATE)
    return Strategy(tuple(outs), tuple(ins), tuple(split))


def _locally_valid(
    spec: OpSpec,
    split: list[Unit],
    size: dict[Unit, int],
    shapes: dict[str, tuple[int, ...]],
    in_axes: dict[str, dict[Unit, int]],
    devices: int,
    accepts: Callable[[list[tuple[int, ...] | None]], bool],
) -> bool:
    """Whether every device's local input shapes satisfy the contract."""
    shares = {u: _chunks(size[u], devices) for u in split}
    checked: set[tuple[int, ...]] = set()
    for r in range(devices):
        local = tuple(shares[u][r] for u in split)
        if local in checked:
            continue
        checked.add(local)
        args: list[tuple[int, ...] | None] = []
        for p in spec.tensor_params:
            shape = shapes.get(p.name)
            if shape is None:
                args.append(None)
                continue
            dims = list(shape)
            for u, s in zip(split, local, strict=True):
                if u in in_axes[p.name]:
                    dims[in_axes[p.name][u]] = s
            args.append(tuple(dims))
        if not accepts(args):
            return False
    return True


def devices_of(mesh_sizes: Sequence[int]) -> int:
    """The devices one dimension may be split over on a mesh of these sizes (all of them)."""
    return math.prod(mesh_sizes)


_rules: dict[int, tuple[OpSpec, OpSharding]] = {}
"""Parsed semantics by spec identity (the spec is kept, so its id is not reused)."""


def rules_of(spec: OpSpec) -> OpSharding:
    """The parsed sharding semantics of ``spec`` (parsed once per registered op)."""
    found = _rules.get(id(spec))
    if found is None:
        found = _rules[id(spec)] = (spec, parse(spec, spec.sharding))
    return found[1]


@dataclass(frozen=True)
class Rules:
    """An op's derived sharding rules, as :func:`torch_nki.sharding` shows them: ``str()`` is a
    table, one line per dimension symbol."""

    op: str
    contract: str
    semantics: OpSharding

    def __str__(self) -> str:
        lines = [f"{self.op}: {self.contract}"]
        width = max((len(d.symbol) + (2 if d.sequence else 0) for d in self.semantics.dims), default=1)
        for d in self.semantics.dims:
            name = (".." if d.sequence else "") + d.symbol
            if d.kind == "whole":
                what = f"whole: never split ({d.reason})"
            else:
                roles = ", ".join(_role_text(u) for u in d.outputs)
                what = f"{d.kind}: split it and {roles}"
                if d.together:
                    what += f"; split together with {', '.join(d.together)} (even shards)"
                for c in d.whole_when:
                    what += f"; whole if {condition_text(c)}"
            lines.append(f"  {name:<{width}}  {what}")
        if self.semantics.additive:
            lines.append(
                f"  additive: {', '.join(self.semantics.additive)} (a partial sum where an output is)"
            )
        return "\n".join(lines)


_ROLE = {"kept": "is split the same way", "summed": "is a partial sum", "unused": "is replicated"}


def _role_text(u: OutputUse) -> str:
    text = f"{u.output} {_ROLE[u.role]}"
    for values, role in u.cases:
        text += f" ({_ROLE[role]} for {' | '.join(repr(v) for v in values)})"
    return text


def sharding(op: str) -> Rules:
    """The derived sharding rules of op ``op`` (``name``, or ``ns::name`` outside ``neuron``):
    for every dimension symbol of its contract, whether splitting it splits the outputs the
    same way, makes them partial sums, or is not allowed (whole), and why."""
    from torch_nki.testing import _lookup

    _, spec = _lookup(op)
    return Rules(spec.qualname, spec.contract_text, rules_of(spec))

"""The contract as the fake kernel sees it: with concrete shapes Rust checks the call; with
symbolic shapes Rust returns output dims as expressions and equalities to assert, which Python
only evaluates (``require`` clauses included). The two must agree on every declared sample and
its perturbations."""

from __future__ import annotations

import json
import re

import pytest
import torch

import torch_nki
from torch_nki import _native, testing
from torch_nki._kernels import COMPARE, evaluate
from torch_nki.errors import ContractShapeError

SPECS = torch_nki._registration().ops


Shapes = list[tuple[int, ...] | None]
"""Tensor shapes in parameter order; ``None`` for an optional tensor left out."""


def _cases() -> list[tuple[str, Shapes]]:
    """Every declared sample's shapes, and each broken three ways (a dimension dropped, one
    changed, one added), for every kernel with samples."""
    cases = []
    for op, spec in sorted(SPECS.items()):
        for sample in spec.samples:
            given = [sample.args[p.name] for p in spec.tensor_params]
            shapes: Shapes = [None if g is None else tuple(g) for g in given]
            cases.append((op, shapes))
            present = [i for i, s in enumerate(shapes) if s is not None]
            last, first = present[-1], present[0]
            changed = list(shapes)
            last_shape = shapes[last]
            if last_shape:
                changed[last] = (*last_shape[:-1], last_shape[-1] + 1)
                cases.append((op, changed))
            first_shape = shapes[first]
            assert first_shape is not None
            cases.append((op, [first_shape[:-1] if i == first else s for i, s in enumerate(shapes)]))
            cases.append((op, [(*first_shape, 1) if i == first else s for i, s in enumerate(shapes)]))
    return cases


CASES = _cases()


def _dtypes(op: str, shapes: Shapes) -> list[str | None]:
    """f32 for every tensor, or the one dtype its rule allows (an index input's i32)."""
    names = [p.name for p in SPECS[op].tensor_params]
    return [
        None if s is None else testing.fixed_dtype(SPECS[op], n) or "f32"
        for n, s in zip(names, shapes, strict=True)
    ]


def _concrete(op: str, shapes: Shapes) -> list[tuple[int, ...]] | str:
    scalars = [p.default for p in SPECS[op].scalar_params]
    try:
        return [tuple(s) for s, _ in _native.Signature(op, shapes, _dtypes(op, shapes), scalars).outputs()]
    except ValueError as err:
        return str(err)


def _symbolic(op: str, shapes: Shapes) -> list[tuple[int, ...]] | str:
    """Every dimension passed as an unknown size named by its value (as a SymInt prints); the
    returned expressions and checks are evaluated on the real values."""
    names = [None if s is None else [f"s{d}" for d in s] for s in shapes]

    def values(message: str) -> str:
        return re.sub(r"\bs(\d+)\b", r"\1", message)

    try:
        scalars = [p.default for p in SPECS[op].scalar_params]
        doc = json.loads(_native.symbolic(op, names, _dtypes(op, shapes), scalars))
    except ValueError as err:
        return values(str(err))
    for c in doc["checks"]:
        if not COMPARE[c["op"]](evaluate(c["lhs"], shapes), evaluate(c["rhs"], shapes)):
            return values(c["message"])
    return [tuple(evaluate(e, shapes) for e in shape) for shape in doc["shapes"]]


@pytest.mark.parametrize(("op", "shapes"), CASES, ids=lambda v: str(v))
def test_symbolic_contract_agrees_with_the_concrete_check(op: str, shapes: Shapes) -> None:
    assert _symbolic(op, shapes) == _concrete(op, shapes)


def test_output_dtypes_come_from_rust() -> None:
    doc = json.loads(_native.symbolic("rmsnorm", [["s0", 8], [8]], ["bf16", "bf16"], [1e-6]))
    assert doc["dtypes"] == ["bf16", "f32"]
    doc = json.loads(_native.symbolic("rmsnorm", [["s0", 8], [8]], ["f64", "f64"], [1e-6]))
    assert doc["dtypes"] == ["f64", "f64"]
    with pytest.raises(
        TypeError, match=r"^neuron::rmsnorm: x has dtype torch\.int8, but the contract allows x in"
    ):
        _native.symbolic("rmsnorm", [["s0", 8], [8]], ["int8", "int8"], [1e-6])


@pytest.mark.usefixtures("dynamo")
def test_symbolic_mismatch_is_reported_in_words() -> None:
    add = torch.compile(lambda x, y: torch.ops.neuron.add(x, y), fullgraph=True, dynamic=True)
    assert add(torch.ones(2, 3, 5), torch.ones(2, 3, 5)).shape == (2, 3, 5)
    with pytest.raises(Exception, match=r"neuron::add: y has shape \[\w+, \w+, \w+\], but the contract"):
        add(torch.ones(2, 3, 5), torch.ones(2, 4, 5))


def test_symbolic_checks_raise_contract_shape_errors() -> None:
    from torch._subclasses.fake_tensor import FakeTensorMode
    from torch.fx.experimental.symbolic_shapes import ShapeEnv

    with FakeTensorMode(shape_env=ShapeEnv()) as mode:
        x = mode.from_tensor(torch.ones(4, 8), static_shapes=False)
        w = mode.from_tensor(torch.ones(9), static_shapes=False)
        with pytest.raises(ContractShapeError, match="weight has shape"):
            torch.ops.neuron.rmsnorm(x, w)
    assert testing.op_spec("rmsnorm").contract_text.startswith("x[..B, D]")

"""The Python contract evaluator (used for symbolic shapes) agrees with the Rust contract."""

from __future__ import annotations

import pytest
import torch

import torch_nki
from torch_nki import _native
from torch_nki._contract import ContractEval

SPECS = torch_nki._registration().ops


def _cases() -> list[tuple[str, list[tuple[int, ...]]]]:
    """Every declared sample's shapes, and each broken three ways (a dimension dropped, one
    changed, one added), for every kernel."""
    cases = []
    for op, spec in sorted(SPECS.items()):
        for sample in spec.samples:
            shapes = [tuple(sample.args[p.name]) for p in spec.tensor_params]
            cases.append((op, shapes))
            last = shapes[-1]
            if last:
                cases.append((op, [*shapes[:-1], (*last[:-1], last[-1] + 1)]))
            cases.append((op, [shapes[0][:-1], *shapes[1:]]))
            cases.append((op, [(*shapes[0], 1), *shapes[1:]]))
    return cases


CASES = _cases()


def _rust(op: str, shapes: list[tuple[int, ...]]) -> list[tuple[int, ...]] | str:
    scalars = [p.default for p in SPECS[op].scalar_params]
    try:
        return [s for s, _ in _native.check(op, shapes, ["f32"] * len(shapes), scalars)]
    except ValueError as err:
        return str(err)


def _python(op: str, shapes: list[tuple[int, ...]]) -> list[tuple[int, ...]] | str:
    try:
        return [tuple(s) for s in ContractEval(SPECS[op]).output_shapes(shapes)]
    except ValueError as err:
        return str(err)


@pytest.mark.parametrize(("op", "shapes"), CASES, ids=lambda v: str(v))
def test_python_contract_matches_rust(op: str, shapes: list[tuple[int, ...]]) -> None:
    assert _python(op, shapes) == _rust(op, shapes)


def test_output_dtypes_follow_the_contract() -> None:
    ev = ContractEval(SPECS["rmsnorm"])
    assert ev.output_dtypes([torch.bfloat16, torch.bfloat16]) == [torch.bfloat16, torch.float32]
    assert ev.dtype_error([torch.float32, torch.float32]) is None
    err = ev.dtype_error([torch.int8, torch.int8])
    assert err is not None and str(err) == (
        "neuron::rmsnorm: x has dtype int8, but the contract allows x in {f32, bf16, f16}"
    )


@pytest.mark.usefixtures("dynamo")
def test_symbolic_mismatch_is_reported_in_words() -> None:
    add = torch.compile(lambda x, y: torch.ops.neuron.add(x, y), fullgraph=True, dynamic=True)
    assert add(torch.ones(2, 3, 5), torch.ones(2, 3, 5)).shape == (2, 3, 5)
    with pytest.raises(Exception, match=r"neuron::add: y has shape \[\w+, \w+, \w+\], but the contract"):
        add(torch.ones(2, 3, 5), torch.ones(2, 4, 5))

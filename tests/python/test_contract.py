"""The Python contract evaluator (used for symbolic shapes) agrees with the Rust contract."""

from __future__ import annotations

import pytest
import torch

import torch_nki
from torch_nki import _native
from torch_nki._contract import ContractEval

SPECS = torch_nki._registration().ops

CASES = [
    ("add", [(3, 4), (3, 4)]),
    ("add", [(7,), (7,)]),
    ("add", [(2, 3, 4), (2, 3, 4)]),
    ("add", [(2, 3, 4), (2, 5, 4)]),
    ("add", [(2, 3, 4), (2, 3)]),
    ("add", [(), ()]),
    ("rmsnorm", [(8, 1024), (1024,)]),
    ("rmsnorm", [(8, 1024), (512,)]),
    ("rmsnorm", [(8,), (8,)]),
    ("rmsnorm", [(2, 3, 4), (4,)]),
    ("matmul", [(3, 4), (4, 5)]),
    ("matmul", [(3, 4), (5, 6)]),
    ("matmul", [(3, 4, 1), (4, 5)]),
]


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
    assert ev.output_dtypes([torch.bfloat16, torch.bfloat16]) == [torch.bfloat16]
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

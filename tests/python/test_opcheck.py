"""torch.library.opcheck with all five test utilities on every registered op (forward kernels,
their ``<name>_fwd`` ops when they have saved outputs, and backward kernels), on the smallest
declared sample in each of fp32 and bf16. Iterates the registry."""

from __future__ import annotations

from typing import Any

import pytest
import torch

import torch_nki
from torch_nki import testing

UTILS = (
    "test_schema",
    "test_autograd_registration",
    "test_faketensor",
    "test_aot_dispatch_static",
    "test_aot_dispatch_dynamic",
)


def _smallest(samples: list[testing.SampleInput]) -> list[testing.SampleInput]:
    """The smallest sample per dtype."""
    best: dict[torch.dtype, testing.SampleInput] = {}
    for s in samples:
        size = sum(t.numel() for t in s.tensors)
        if s.dtype not in best or size < sum(t.numel() for t in best[s.dtype].tensors):
            best[s.dtype] = s
    return list(best.values())


def _cases() -> list[tuple[str, testing.SampleInput]]:
    dtypes = [torch.float32, torch.bfloat16]
    cases: list[tuple[str, testing.SampleInput]] = []
    for op in torch_nki.ops():
        spec = testing.op_spec(op)
        if spec.backward_of:
            samples = _smallest(testing.backward_sample_inputs(op, dtypes=dtypes))
        else:
            samples = _smallest(testing.sample_inputs(op, dtypes=dtypes, requires_grad=True))
        names = [op] + ([spec.forward_op[0]] if spec.forward_op else [])
        cases.extend((name, s) for name in names for s in samples)
    return cases


CASES = _cases()


def test_every_op_has_opcheck_cases() -> None:
    assert {testing.op_spec(s.op).name for _, s in CASES} == set(torch_nki.ops())


@pytest.mark.usefixtures("dynamo")
@pytest.mark.parametrize(("name", "sample"), CASES, ids=lambda c: str(c))
def test_opcheck(name: str, sample: testing.SampleInput) -> None:
    op = getattr(torch.ops.neuron, name).default
    args: tuple[Any, ...] = sample.args
    result = torch.library.opcheck(op, args, test_utils=UTILS)
    assert result == dict.fromkeys(UTILS, "SUCCESS")

"""torch.library.opcheck with all five test utilities on every op."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import torch

import torch_nki

from refs import rand

UTILS = (
    "test_schema",
    "test_autograd_registration",
    "test_faketensor",
    "test_aot_dispatch_static",
    "test_aot_dispatch_dynamic",
)

CASES: dict[str, Callable[[], tuple[Any, ...]]] = {
    "add": lambda: (rand(3, 5, requires_grad=True), rand(3, 5, requires_grad=True)),
    "rmsnorm": lambda: (rand(3, 5, requires_grad=True), rand(5, requires_grad=True), 1e-5),
    "matmul": lambda: (rand(3, 5, requires_grad=True), rand(5, 4, requires_grad=True)),
}


def test_every_op_has_an_opcheck_case() -> None:
    assert sorted(CASES) == torch_nki.ops()


@pytest.mark.usefixtures("dynamo")
@pytest.mark.parametrize("name", sorted(CASES))
def test_opcheck(name: str) -> None:
    op = getattr(torch.ops.neuron, name).default
    result = torch.library.opcheck(op, CASES[name](), test_utils=UTILS)
    assert result == dict.fromkeys(UTILS, "SUCCESS")


@pytest.mark.usefixtures("dynamo")
def test_opcheck_rank3_add_and_bf16() -> None:
    op = torch.ops.neuron.add.default
    torch.library.opcheck(op, (rand(2, 3, 7), rand(2, 3, 7)), test_utils=UTILS)
    x, w = rand(4, 6, dtype=torch.bfloat16), rand(6, dtype=torch.bfloat16)
    torch.library.opcheck(torch.ops.neuron.rmsnorm.default, (x, w), test_utils=UTILS)

"""torch.compile(fullgraph=True): the ops are opaque graph nodes with contract-derived fake kernels."""

from __future__ import annotations

import pytest
import torch

from refs import rand, tol

neuron = torch.ops.neuron


def block(x: torch.Tensor, w: torch.Tensor, proj: torch.Tensor, residual: torch.Tensor) -> torch.Tensor:
    """rmsnorm → matmul → add: every library op in one graph."""
    h = neuron.rmsnorm(x, w, 1e-6)
    h = neuron.matmul(h, proj)
    return neuron.add(h, residual)


def _inputs(n: int, d: int = 96, e: int = 40, requires_grad: bool = False) -> list[torch.Tensor]:
    return [rand(*s, requires_grad=requires_grad) for s in ((n, d), (d,), (d, e), (n, e))]


@pytest.mark.usefixtures("dynamo")
def test_fullgraph_equals_eager() -> None:
    compiled = torch.compile(block, fullgraph=True)
    for dtype in (torch.float32, torch.bfloat16):
        args = [t.to(dtype) for t in _inputs(130)]
        torch.testing.assert_close(compiled(*args), block(*args), rtol=0, atol=0)


@pytest.mark.usefixtures("dynamo")
def test_dynamic_shapes_do_not_recompile() -> None:
    counts = {"frames": 0}

    def backend(gm: torch.fx.GraphModule, example_inputs: list[torch.Tensor]) -> object:
        counts["frames"] += 1
        return gm.forward

    compiled = torch.compile(block, fullgraph=True, dynamic=True, backend=backend)
    for n in (5, 17, 300):
        args = _inputs(n)
        torch.testing.assert_close(compiled(*args), block(*args), rtol=0, atol=0)
    assert counts["frames"] == 1


@pytest.mark.usefixtures("dynamo")
def test_inductor_dynamic_shapes() -> None:
    compiled = torch.compile(block, fullgraph=True, dynamic=True)
    for n in (3, 129):
        args = _inputs(n)
        torch.testing.assert_close(compiled(*args), block(*args), rtol=0, atol=0)


@pytest.mark.usefixtures("dynamo")
def test_backward_through_compile() -> None:
    compiled = torch.compile(block, fullgraph=True)
    args = _inputs(33, requires_grad=True)
    compiled(*args).square().sum().backward()
    got = [t.grad.clone() for t in args]
    for t in args:
        t.grad = None
    block(*args).square().sum().backward()
    for g, t in zip(got, args, strict=True):
        torch.testing.assert_close(g, t.grad, **tol(torch.float32))


@pytest.mark.usefixtures("dynamo")
def test_contract_error_surfaces_at_trace_time() -> None:
    compiled = torch.compile(lambda x, w: neuron.rmsnorm(x, w), fullgraph=True)
    with pytest.raises(Exception, match=r"weight has shape \[9\], but the contract weight\[D\] needs D = 8"):
        compiled(rand(4, 8), rand(9))

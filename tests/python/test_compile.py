"""torch.compile(fullgraph=True): every op is an opaque graph node with a contract-derived fake
kernel; compiled results equal eager bit for bit, compiled calls take the fast path eager calls
take, dynamic shapes do not recompile, and gradients flow through compiled graphs. Iterates the
registry."""

from __future__ import annotations

from typing import Any

import pytest
import torch

from torch_nki import _fast, _native, testing

from refs import rand

neuron = torch.ops.neuron
OPS = testing.ops_with_reference()


def _fn(op: str) -> Any:
    packet = getattr(neuron, op)

    def call(*args: Any) -> Any:
        return packet(*args)

    return call


@pytest.mark.usefixtures("dynamo")
@pytest.mark.parametrize("op", OPS)
def test_fullgraph_equals_eager(op: str) -> None:
    for sample in testing.sample_inputs(op, dtypes=[torch.float32, torch.bfloat16]):
        torch._dynamo.reset()  # one static graph per sample, well under the recompile limit
        compiled = torch.compile(_fn(op), fullgraph=True)
        eager = testing.call(sample)
        got = testing.public_outputs(compiled(*sample.args))
        for a, b in zip(got, eager, strict=True):
            torch.testing.assert_close(a, b, rtol=0, atol=0)
        if _fast.enabled():
            # The graph Inductor generated calls the op's C++ kernels, as an eager call does (no
            # Python kernel): a panic armed in the fast path's plan is consumed by the call.
            _native._force_panic("fast.plan")
            compiled(*sample.args)
            assert _native._armed() is None, f"{sample}: the compiled call missed the fast path"


def _grown(sample: testing.SampleInput) -> testing.SampleInput:
    """The sample with every tensor dimension doubled (equal dims stay equal, and divisibility
    requirements such as ``D % 2 == 0`` or ``H % Hkv == 0`` keep holding)."""
    make = testing.uniform(3)
    args = tuple(
        make([d * 2 for d in a.shape], a.dtype) if isinstance(a, torch.Tensor) else a for a in sample.args
    )
    return testing.SampleInput(sample.op, sample.dtype, args, sample.index)


@pytest.mark.usefixtures("dynamo")
@pytest.mark.parametrize("op", OPS)
def test_dynamic_shapes_do_not_recompile(op: str) -> None:
    """A sample and the same sample with every dimension doubled run through one dynamic graph
    (samples with a size-1 dimension are skipped: dynamo specialises sizes 0 and 1)."""
    counts = {"frames": 0}

    def backend(gm: torch.fx.GraphModule, example_inputs: list[torch.Tensor]) -> object:
        counts["frames"] += 1
        return gm.forward

    candidates = [
        s
        for s in testing.sample_inputs(op, dtypes=[torch.float32])
        if all(d >= 2 for t in s.tensors for d in t.shape)
    ]
    assert candidates, f"{op} has no sample without size-1 dimensions"
    sample = max(candidates, key=lambda s: sum(t.dim() for t in s.tensors))
    compiled = torch.compile(_fn(op), fullgraph=True, dynamic=True, backend=backend)
    for s in (sample, _grown(sample)):
        for a, b in zip(testing.public_outputs(compiled(*s.args)), testing.call(s), strict=True):
            torch.testing.assert_close(a, b, rtol=0, atol=0)
    assert counts["frames"] == 1


@pytest.mark.usefixtures("dynamo")
@pytest.mark.parametrize("op", [op for op in OPS if testing.op_spec(op).backward])
def test_backward_through_compile(op: str) -> None:
    sample = testing.sample_inputs(op, dtypes=[torch.float32], requires_grad=True)[0]
    compiled = torch.compile(_fn(op), fullgraph=True)
    leaves = sample.tensors
    sum(o.square().sum() for o in testing.public_outputs(compiled(*sample.args))).backward()
    got = [t.grad.clone() for t in leaves if t.grad is not None]
    for t in leaves:
        t.grad = None
    sum(o.square().sum() for o in testing.call(sample)).backward()
    want = [t.grad for t in leaves if t.grad is not None]
    assert len(got) == len(want) > 0
    for g, w in zip(got, want, strict=True):
        torch.testing.assert_close(g, w, rtol=1e-5, atol=1e-5)


def block(x: torch.Tensor, w: torch.Tensor, proj: torch.Tensor, residual: torch.Tensor) -> torch.Tensor:
    """A transformer-ish composition of library ops in one graph: norm → projection → residual."""
    h = neuron.rmsnorm(x, w, 1e-6)
    h = neuron.matmul(h, proj)
    return neuron.add(h, residual)


def _inputs(n: int, d: int = 96, e: int = 40) -> list[torch.Tensor]:
    return [rand(*s) for s in ((n, d), (d,), (d, e), (n, e))]


@pytest.mark.usefixtures("dynamo")
def test_inductor_dynamic_shapes_on_a_composed_graph() -> None:
    compiled = torch.compile(block, fullgraph=True, dynamic=True)
    for n in (3, 129):
        args = _inputs(n)
        torch.testing.assert_close(compiled(*args), block(*args), rtol=0, atol=0)


@pytest.mark.usefixtures("dynamo")
def test_contract_error_surfaces_at_trace_time() -> None:
    compiled = torch.compile(lambda x, w: neuron.rmsnorm(x, w), fullgraph=True)
    with pytest.raises(Exception, match=r"weight has shape \[9\], but the contract weight\[D\] needs D = 8"):
        compiled(rand(4, 8), rand(9))

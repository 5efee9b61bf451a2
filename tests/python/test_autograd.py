"""Gradients of every op that declares a backward kernel, against torch autograd through the
op's ATen reference, on every declared sample in fp32 and bf16; the generated autograd
registration's behaviour (requested gradients only, ops without a backward, double backward).

The reference gradients are computed in fp32 from the same (rounded) inputs and rounded to the
sample dtype once, which is what the kernels do (fp32 engines, one rounding per write). Each
gradient is held to its backward kernel's tolerance class.
"""

from __future__ import annotations

import warnings

import pytest
import torch

from torch_nki import autograd, testing

DTYPES = [torch.float32, torch.bfloat16]
WITH_BACKWARD = [op for op in testing.ops_with_reference() if testing.op_spec(op).backward]
SAMPLES = [s for op in WITH_BACKWARD for s in testing.sample_inputs(op, dtypes=DTYPES)]


def _float_leaves(args: tuple[object, ...], dtype: torch.dtype | None = None) -> tuple[object, ...]:
    out = []
    for a in args:
        if isinstance(a, torch.Tensor) and a.is_floating_point():
            a = a.detach().to(dtype or a.dtype).requires_grad_(True)
        out.append(a)
    return tuple(out)


@pytest.mark.parametrize("sample", SAMPLES, ids=str)
def test_gradients_match_autograd_of_the_reference(sample: testing.SampleInput) -> None:
    spec = testing.op_spec(sample.op)
    args = _float_leaves(sample.args)
    outs = testing.public_outputs(getattr(torch.ops.neuron, sample.op)(*args))
    make = testing.uniform(7)
    grads_out = [make(o.shape, o.dtype) for o in outs]
    torch.autograd.backward(outs, grads_out)

    ref_args = _float_leaves(sample.args, torch.float32)
    ref_outs = testing.reference(sample, ref_args)
    torch.autograd.backward(ref_outs, [g.float() for g in grads_out])

    bwd = testing.backward_sample(sample)
    tols = dict(zip([o.name for o in testing.op_spec(bwd.op).outputs], testing.tolerances(bwd), strict=True))
    for p, a, r in zip(spec.params, args, ref_args, strict=True):
        if not isinstance(a, torch.Tensor):
            continue
        tol = tols.get(f"grad_{p.name}")
        if tol is None:
            assert a.grad is None, f"{sample}: {p.name} has no grad_ output but got a gradient"
            continue
        assert isinstance(r, torch.Tensor) and r.grad is not None and a.grad is not None
        rtol, atol = tol
        torch.testing.assert_close(
            a.grad, r.grad.to(a.dtype), rtol=rtol, atol=atol, msg=lambda m, n=p.name: f"{sample} d{n}: {m}"
        )


@pytest.mark.parametrize("op", WITH_BACKWARD)
def test_only_requested_gradients(op: str) -> None:
    sample = testing.sample_inputs(op, dtypes=[torch.float32])[0]
    args = list(sample.args)
    first = next(i for i, a in enumerate(args) if isinstance(a, torch.Tensor))
    args[first] = args[first].detach().requires_grad_(True)
    outs = testing.public_outputs(getattr(torch.ops.neuron, op)(*args))
    sum(o.sum() for o in outs).backward()
    assert args[first].grad is not None
    assert all(a.grad is None for i, a in enumerate(args) if isinstance(a, torch.Tensor) and i != first)


@pytest.mark.parametrize("op", WITH_BACKWARD)
def test_double_backward_raises_naming_the_backward_kernel(op: str) -> None:
    bwd = testing.op_spec(op).backward
    assert bwd is not None
    sample = testing.sample_inputs(op, dtypes=[torch.float32])[0]
    args = _float_leaves(sample.args)
    outs = testing.public_outputs(getattr(torch.ops.neuron, op)(*args))
    leaves = [a for a in args if isinstance(a, torch.Tensor) and a.requires_grad]
    seeds = [torch.ones_like(o).requires_grad_(True) for o in outs]
    grads = torch.autograd.grad(outs, leaves, grad_outputs=seeds, create_graph=True)
    with pytest.raises(autograd.NoBackwardError, match=rf"neuron::{bwd.kernel}: cannot compute gradients"):
        sum(g.square().sum() for g in grads).backward()


def test_gradcheck_in_float64() -> None:
    """float64 runs in fp32 (as on TorchNeuron): gradcheck with a large step and loose tolerances."""
    loose = {"eps": 1e-3, "atol": 1e-2, "rtol": 1e-2}
    for op in WITH_BACKWARD:
        sample = min(
            testing.sample_inputs(op, dtypes=[torch.float32]), key=lambda s: sum(t.numel() for t in s.tensors)
        )
        args = _float_leaves(sample.args, torch.float64)
        fn = getattr(torch.ops.neuron, op)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # float64 downcast warnings
            assert torch.autograd.gradcheck(lambda *a, f=fn: f(*a), args, **loose), op

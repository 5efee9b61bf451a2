"""The fast path (C++ dispatcher kernels calling the Rust kernels through the module's C ABI)
computes exactly what the Python kernels compute, falls back to them for everything unusual,
and leaves autograd, errors and the registry as they were."""

from __future__ import annotations

import os
import subprocess
import sys
import warnings
from typing import Any

import pytest
import torch
import torch.nn.functional as F

import torch_nki
from torch_nki import _fast, _native, testing
from torch_nki._register import GRAD_PREFIX, SLOW_PREFIX
from torch_nki.errors import ContractIndexError


def _bits(t: torch.Tensor) -> torch.Tensor:
    ints = {8: torch.int64, 4: torch.int32, 2: torch.int16, 1: torch.int8}
    return t.view(ints[t.element_size()]) if t.is_floating_point() else t


def _kernel_op(op: str) -> str:
    spec = testing.op_spec(op)
    return spec.forward_op[0] if spec.forward_op else op


def _samples(op: str) -> list[testing.SampleInput]:
    if testing.op_spec(op).backward_of is not None:
        return testing.backward_sample_inputs(op)
    return testing.sample_inputs(op)


def test_the_fast_path_is_built_and_enabled() -> None:
    assert _fast.enabled(), "the C++ kernels did not load (see the RuntimeWarning at import)"
    assert _fast.library_path() is not None
    assert torch._C._dispatch_has_kernel_for_dispatch_key("neuron::add", "AutogradCPU")


@pytest.mark.parametrize("op", testing.ops_with_reference() + testing.backward_kernels())
def test_fast_and_python_kernels_give_the_same_bits(op: str) -> None:
    name = _kernel_op(op)
    fast = getattr(torch.ops.neuron, name)
    slow = getattr(torch.ops.neuron, SLOW_PREFIX + name)
    for sample in _samples(op):
        with torch.no_grad():
            got = testing.public_outputs(fast(*sample.args))
            want = testing.public_outputs(slow(*sample.args))
        for g, w in zip(got, want, strict=True):
            assert g.dtype == w.dtype and g.shape == w.shape, sample
            assert torch.equal(_bits(g), _bits(w)), f"{sample}: the fast path differs"


def test_a_repeated_call_finds_its_own_program_among_the_recent_ones() -> None:
    """Each thread remembers its recent plans; a call that differs only in a scalar, a shape, a
    dtype or a left-out optional tensor must not take another call's program."""
    rmsnorm, slow = torch.ops.neuron.rmsnorm, getattr(torch.ops.neuron, SLOW_PREFIX + "rmsnorm_fwd")
    x, w = torch.rand(6, 8), torch.rand(8)
    calls = [(x, w, e) for e in (1e-6, 0.5, 1e-6, float("nan"), -0.0, 0.0, 0.5)]
    calls += [(x[:3], w, 0.5), (x.bfloat16(), w.bfloat16(), 0.5), (torch.rand(6, 4), torch.rand(4), 0.5)]
    calls += calls[:3] * 4  # more than the recent plans a thread keeps, then back
    with torch.no_grad():
        for args in calls:
            got, want = rmsnorm(*args), slow(*args)[0]
            assert torch.equal(_bits(got), _bits(want)), args
    layernorm = torch.ops.neuron.layernorm
    x = torch.rand(5, 7)
    with torch.no_grad():
        with_bias = layernorm(x, torch.ones(7), torch.full((7,), 2.0), 1e-5)
        without = layernorm(x, torch.ones(7), None, 1e-5)
    assert torch.allclose(with_bias - 2.0, without, atol=1e-6)


def test_unusual_calls_fall_back_to_the_python_kernel() -> None:
    x, y = torch.rand(4, 6), torch.rand(4, 6)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        out = torch.ops.neuron.add(x.double(), y.double())  # f64: computed in f32, returned f64
    assert out.dtype == torch.float64 and torch.allclose(out, (x + y).double())
    xt = torch.rand(6, 4).t()  # not contiguous
    assert torch.equal(torch.ops.neuron.add(xt, y), xt + y)
    with pytest.raises(torch_nki.ContractShapeError, match=r"^neuron::add: y has shape \[4, 5\]"):
        torch.ops.neuron.add(x, torch.rand(4, 5))
    with pytest.raises(
        torch_nki.ContractDtypeError, match=r"x has dtype torch\.int8 \(i8\), but the contract allows"
    ):
        torch.ops.neuron.add(x.to(torch.int8), y.to(torch.int8))
    assert torch.ops.neuron.add(x.to("meta"), y.to("meta")).device.type == "meta"


def test_autograd_is_recorded_only_when_a_gradient_can_be_needed() -> None:
    x, w = torch.rand(3, 8), torch.rand(8)
    assert torch.ops.neuron.rmsnorm(x, w).grad_fn is None
    xg = x.clone().requires_grad_()
    with torch.no_grad():
        assert torch.ops.neuron.rmsnorm(xg, w).grad_fn is None
    y = torch.ops.neuron.rmsnorm(xg, w)
    assert y.grad_fn is not None
    (g,) = torch.autograd.grad(y.sum(), xg)
    assert g.shape == x.shape


WITH_BACKWARD = [op for op in testing.ops_with_reference() if testing.op_spec(op).backward]


def _record(op: str, sample: testing.SampleInput, cpp: bool) -> tuple[list[Any], list[tuple[Any, ...]], Any]:
    """Gradients of every float input (only the first output used, so the others' gradients are
    the zeros the node makes), what was saved (shape, dtype per packed tensor) and the node."""
    previous = _fast.cpp_autograd(cpp)
    packed: list[tuple[Any, ...]] = []

    def pack(t: torch.Tensor) -> torch.Tensor:
        packed.append((tuple(t.shape), t.dtype))
        return t

    try:
        args = [
            a.detach().clone().requires_grad_()
            if isinstance(a, torch.Tensor) and a.is_floating_point()
            else a
            for a in sample.args
        ]
        with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
            outs = testing.public_outputs(getattr(torch.ops.neuron, op)(*args))
        seed = testing.uniform(3)(outs[0].shape, outs[0].dtype)
        outs[0].backward(seed)
        grads = [a.grad for a in args if isinstance(a, torch.Tensor) and a.requires_grad]
        return grads, packed, outs[0].grad_fn
    finally:
        _fast.cpp_autograd(previous)


@pytest.mark.parametrize("op", WITH_BACKWARD)
def test_the_cpp_autograd_node_matches_the_python_function(op: str) -> None:
    """Every registry op with a backward: the C++ node saves what the Python autograd.Function
    saves and gives the same gradient bits."""
    assert _fast.cpp_autograd(), "the C++ node is off by default"
    for sample in testing.sample_inputs(op, dtypes=[torch.float32, torch.bfloat16]):
        got, got_saved, node = _record(op, sample, cpp=True)
        want, want_saved, py_node = _record(op, sample, cpp=False)
        assert not isinstance(node, torch.autograd.function.BackwardCFunction), "not the C++ node"
        assert isinstance(py_node, torch.autograd.function.BackwardCFunction)
        assert node.name() == f"NeuronAutograd_{_kernel_op(op)}Backward"
        assert got_saved == want_saved, f"{sample}: the C++ node saves something else"
        for g, w in zip(got, want, strict=True):
            assert (g is None) == (w is None), sample
            if g is not None:
                assert g.dtype == w.dtype and g.shape == w.shape, sample
                assert torch.equal(_bits(g), _bits(w)), f"{sample}: the gradients differ"


def test_the_cpp_autograd_node_frees_its_saved_tensors() -> None:
    x, w = torch.rand(3, 8, requires_grad=True), torch.rand(8, requires_grad=True)
    y = torch.ops.neuron.rmsnorm(x, w)
    y.sum().backward()
    with pytest.raises(RuntimeError, match="backward through the graph a second time"):
        y.sum().backward()
    y = torch.ops.neuron.rmsnorm(x, w)
    with torch.no_grad():
        x.mul_(2)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        y.sum().backward()


@pytest.mark.parametrize("entry", _native._fast_entry_points())
def test_a_panic_in_the_c_abi_takes_the_python_kernel(entry: str) -> None:
    x = torch.rand(5, 7)
    _native._force_panic(entry)
    assert _native._armed() == entry
    assert torch.equal(torch.ops.neuron.add(x, x), x + x)
    assert _native._armed() is None, "the call did not go through the fast path"
    assert torch.equal(torch.ops.neuron.add(x, x), x + x)


def test_string_and_none_scalars_take_the_fast_path() -> None:
    x = torch.rand(5, 7)
    for call, expected in [
        (lambda: torch.ops.neuron.gelu(x, approximate="tanh"), F.gelu(x, approximate="tanh")),
        (lambda: torch.ops.neuron.gelu(x), F.gelu(x)),
    ]:
        _native._force_panic("fast.plan")
        got = call()
        assert _native._armed() is None, "the call did not reach the fast path's plan"
        torch.testing.assert_close(got, expected)
    q = torch.rand(1, 1, 4, 8)
    _native._force_panic("fast.plan")
    out, _ = torch.ops.neuron.flash_attention(q, q, q, False, None)
    assert _native._armed() is None
    torch.testing.assert_close(out, F.scaled_dot_product_attention(q, q, q))


def test_int64_indices_take_the_fast_path_and_out_of_range_ones_fall_back() -> None:
    """torch's class targets are int64: the fast path narrows them to the kernel's int32 itself
    (the Python kernel's range check and result), and leaves a value int32 cannot hold to the
    Python kernel, which raises."""
    x, t = torch.randn(6, 9), torch.tensor([0, 8, 3, -100, 1, 2])
    _native._force_panic("fast.execute")
    torch.ops.neuron.cross_entropy(x, t)
    assert _native._armed() is None, "the int64 call did not reach the fast path's execute"
    got = torch.ops.neuron.cross_entropy(x, t, reduction="none")
    assert torch.equal(got, torch.ops.neuron.cross_entropy(x, t.int(), reduction="none"))
    torch.testing.assert_close(got, F.cross_entropy(x, t, reduction="none"))
    for bad in (2**40, -(2**31) - 1):
        with pytest.raises(ContractIndexError, match=f"target holds {bad}, which does not fit"):
            torch.ops.neuron.cross_entropy(x, torch.tensor([0, bad, 1, 1, 1, 1]))


def _ops_with_saved_outputs() -> list[str]:
    return [op for op in torch_nki.ops() if "::" not in op and testing.op_spec(op).forward_op]


@pytest.mark.parametrize("op", _ops_with_saved_outputs())
def test_the_public_op_of_a_kernel_with_saved_outputs_is_a_cpp_kernel(op: str) -> None:
    """`<name>` (public outputs) calls `<name>_fwd` from C++, with the same bits and errors."""
    dump = torch._C._dispatch_dump(f"neuron::{op}")
    assert "CompositeImplicitAutograd" in dump and "fast_ops.cpp" in dump, dump
    spec = testing.op_spec(op)
    public = getattr(torch.ops.neuron, op)
    fwd = getattr(torch.ops.neuron, spec.forward_op[0])
    kept = [i for i, o in enumerate(spec.outputs) if not o.saved]
    for sample in _samples(op):
        with torch.no_grad():
            got = testing.public_outputs(public(*sample.args))
            every = fwd(*sample.args)
        want = [every[i] for i in kept]
        for g, w in zip(got, want, strict=True):
            assert torch.equal(_bits(g), _bits(w)), sample
    # A bad argument reaches the caller as `<name>_fwd` raises it.
    bad = tuple(torch.zeros(0) if isinstance(a, torch.Tensor) else a for a in _samples(op)[0].args)
    with pytest.raises(Exception) as direct:
        fwd(*bad)
    with pytest.raises(type(direct.value)):
        public(*bad)


def test_hidden_twins_are_not_listed() -> None:
    assert not any(GRAD_PREFIX in op or SLOW_PREFIX in op for op in torch_nki.ops())


def test_disabled_fast_path_runs_the_python_kernels() -> None:
    code = (
        "import torch, torch_nki\n"
        "from torch_nki import _fast\n"
        "x = torch.rand(4, 4)\n"
        "assert torch.equal(torch.ops.neuron.add(x, x), x + x)\n"
        "xg = x.clone().requires_grad_()\n"
        "y = torch.ops.neuron.rmsnorm(xg, torch.ones(4))\n"
        "y.sum().backward()\n"
        "assert isinstance(y.grad_fn, torch.autograd.function.BackwardCFunction), type(y.grad_fn)\n"
        "assert xg.grad is not None and not _fast.cpp_autograd()\n"
        "has = torch._C._dispatch_has_kernel_for_dispatch_key\n"
        "print(_fast.enabled(), has('neuron::add', 'AutogradCPU'))\n"
    )
    env = {**os.environ, "TORCH_NKI_FAST": "0"}
    cmd = [sys.executable, "-c", code]
    result = subprocess.run(cmd, capture_output=True, text=True, env=env, check=False)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "False False"


def test_a_failing_build_is_a_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CXX", "false")
    with pytest.raises(RuntimeError, match=r"compiling fast_ops\.cpp failed"):
        _fast.build()

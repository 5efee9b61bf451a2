"""The ``neuron`` device glue (``torch_nki.device``), with the NKI frontend standing in for the
``nki`` package: it loads the right generated source, calls the kernel with the right tensors
(scalars are constants in the source), caches per signature, and registers under PrivateUse1
only when asked (no ``nki`` or Neuron backend is installed here)."""

from __future__ import annotations

import types
from typing import Any

import torch

import torch_nki
from torch_nki import device, nki, testing


class RecordingNki(types.ModuleType):
    """The frontend as an ``nki`` module that records every kernel ``jit`` makes and every call."""

    def __init__(self) -> None:
        super().__init__("nki")
        self.language = nki.language
        self.isa = nki.isa
        self.jitted: list[str] = []
        self.calls: list[list[tuple[int, ...]]] = []

    def jit(self, fn: Any) -> Any:
        self.jitted.append(fn.__name__)
        return _Recorded(nki.jit(fn), self.calls)


class _Recorded:
    """A jitted kernel that records each call's shapes, launched as NKI launches one
    (``kernel(...)`` or ``kernel[grid](...)``)."""

    def __init__(self, kernel: Any, calls: list[list[tuple[int, ...]]]) -> None:
        self.kernel, self.calls = kernel, calls

    def __getitem__(self, grid: Any) -> _Recorded:
        return _Recorded(self.kernel[grid], self.calls)

    def __call__(self, *tensors: torch.Tensor) -> Any:
        self.calls.append([tuple(t.shape) for t in tensors])
        return self.kernel(*tensors)


def _has_device_kernel(op: str) -> bool:
    return bool(torch._C._dispatch_has_kernel_for_dispatch_key(f"neuron::{op}", "PrivateUse1"))


def test_nothing_is_registered_without_nki() -> None:
    assert not device.available()
    assert not any(_has_device_kernel(op) for op in torch_nki.ops())


def test_every_op_runs_through_the_glue_to_the_cpu_kernels_bits() -> None:
    fake = RecordingNki()
    glue = device.NeuronDevice(fake)
    for op in testing.ops_with_reference():
        sample = testing.sample_inputs(op)[0]
        got = glue.implementation(op)(*sample.args)
        spec = testing.op_spec(op)
        full = getattr(torch.ops.neuron, spec.forward_op[0] if spec.forward_op else op)
        want = full(*sample.args)
        for g, w in zip(testing.public_outputs(got), testing.public_outputs(want), strict=True):
            assert torch.equal(g, w), op
        assert fake.calls[-1] == [tuple(t.shape) for t in sample.tensors]
    assert fake.jitted == testing.ops_with_reference()


def test_source_constants_and_per_signature_cache() -> None:
    fake = RecordingNki()
    glue = device.NeuronDevice(fake)
    run = glue.implementation("rmsnorm")
    x, w = torch.rand(130, 96), torch.rand(96)
    run(x, w, 1e-5)
    run(x, w, 1e-5)
    assert len(fake.jitted) == 1 and len(fake.calls) == 2
    (compiled,) = glue.compiled()
    assert compiled.source == torch_nki.emit("rmsnorm", x, w, 1e-5)
    assert "operand1=1e-5)" in compiled.source  # eps is a constant of the generated kernel
    run(x, w, 1e-3)  # another constant: another kernel
    run(x[:64], w, 1e-5)  # another shape: another kernel
    run(x.to(torch.bfloat16), w.to(torch.bfloat16), 1e-5)  # another dtype: another kernel
    assert len(fake.jitted) == 4 and len(glue.compiled()) == 4
    run(x, w, float("nan"))
    run(x, w, float("nan"))  # NaN is one key
    assert len(glue.compiled()) == 5


def test_register_adds_privateuse1_kernels_and_unregister_removes_them() -> None:
    glue = device.NeuronDevice(RecordingNki())
    glue.register()
    try:
        assert _has_device_kernel("add") and _has_device_kernel("rmsnorm_fwd")
        assert _has_device_kernel("matmul_backward")
    finally:
        glue.unregister()
    assert not _has_device_kernel("add")

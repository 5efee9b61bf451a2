"""The NKI round trip, for every registry kernel (forward and backward, iterating the registry)
at every declared sample and dtype: Rust kernel → Program → NKI source (``torch_nki.emit``) →
the ``torch_nki.nki`` frontend → a second Program. The unrolled instruction streams are equal, and the
generated source simulates to exactly the bits ``torch.ops.neuron.<op>`` returns."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import torch

import torch_nki
from torch_nki import cli, nki, testing
from torch_nki._dtypes import INDEX_DOWNCAST

MIN_SIGNATURES = 4


def _samples(op: str) -> list[testing.SampleInput]:
    if testing.op_spec(op).backward_of is not None:
        return testing.backward_sample_inputs(op)
    return testing.sample_inputs(op)


def _cases() -> list[Any]:
    cases = []
    for op in testing.ops_with_reference() + testing.backward_kernels():
        samples = _samples(op)
        assert len(samples) >= MIN_SIGNATURES, f"{op}: {len(samples)} signatures"
        cases += [pytest.param(op, i, id=f"{op}-{i}") for i in range(len(samples))]
    return cases


def _full_outputs(sample: testing.SampleInput) -> tuple[torch.Tensor, ...]:
    """Every output the kernel writes (saved ones included), from the registered op."""
    spec = testing.op_spec(sample.op)
    name = spec.forward_op[0] if spec.forward_op else spec.name
    with torch.no_grad():
        return testing.public_outputs(getattr(torch.ops.neuron, name)(*sample.args))


def _bits(t: torch.Tensor) -> torch.Tensor:
    """The tensor's bit patterns (so NaNs compare too)."""
    ints = {4: torch.int32, 2: torch.int16}
    return t.view(ints[t.element_size()]) if t.is_floating_point() else t


def _kernel_name(op: str) -> str:
    spec = testing.op_spec(op)
    return spec.forward_op[0].removesuffix("_fwd") if spec.forward_op else op


@pytest.mark.parametrize(("op", "index"), _cases())
def test_generated_source_traces_back_to_the_same_program_and_bits(op: str, index: int) -> None:
    sample = _samples(op)[index]
    source = torch_nki.emit(op, *sample.args)
    kernel = nki.launchable(nki.load_source(source, op), _kernel_name(op))
    # An NKI kernel takes index inputs as int32 (the torch op narrows torch's int64).
    tensors = [t.to(INDEX_DOWNCAST.get(t.dtype, t.dtype)) for t in sample.tensors]

    traced = kernel.trace(*tensors)
    rust = torch_nki.kernel(op).signature(*sample.args).program("trn2")
    assert rust.difference(traced) is None, f"{sample}"
    assert traced.instruction_count() == rust.unrolled().instruction_count()
    traced.validate()

    # The frontend's locations are the generated source's lines.
    assert "<nki:" in traced.to_json()

    got = kernel(*tensors)
    got = got if isinstance(got, tuple) else (got,)
    want = _full_outputs(sample)
    assert len(got) == len(want)
    for g, w in zip(got, want, strict=True):
        assert g.dtype == w.dtype and g.shape == w.shape, f"{sample}"
        assert torch.equal(_bits(g), _bits(w)), f"{sample}: outputs differ"


def test_a_changed_source_is_caught() -> None:
    x = torch.rand(130, 96)
    w = torch.rand(96)
    source = torch_nki.emit("rmsnorm", x, w)
    changed = source.replace("op0=nl.multiply", "op0=nl.add", 1)
    assert changed != source
    kernel = nki.launchable(nki.load_source(changed, "rmsnorm"), "rmsnorm")
    rust = torch_nki._native.Signature("rmsnorm", [[130, 96], [96]], ["f32", "f32"], [1e-6]).program("trn2")
    difference = rust.difference(kernel.trace(x, w))
    assert difference is not None and "differs" in difference and "<nki:rmsnorm:" in difference


def test_cli_emitted_rmsnorm_runs_to_the_ops_bits(tmp_path: Path) -> None:
    out = tmp_path / "rmsnorm_nki.py"
    argv = ["emit", "rmsnorm", "--shape", "x=300x1000", "--shape", "weight=1000", "--dtype", "bf16"]
    assert cli.main([*argv, "-o", str(out)]) == 0
    kernel = nki.launchable(nki.load_source(out.read_text(), "rmsnorm"), "rmsnorm")
    x = torch.rand(300, 1000, dtype=torch.bfloat16) * 4 - 2
    weight = torch.rand(1000, dtype=torch.bfloat16)
    y, _rstd = kernel(x, weight)
    assert torch.equal(_bits(y), _bits(torch.ops.neuron.rmsnorm(x, weight)))

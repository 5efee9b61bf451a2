"""Every op in eager mode against its declared ATen reference, on every declared sample (ragged
and edge shapes) in every dtype it runs in. The suite iterates the registry: a new kernel is
tested here without editing this file."""

from __future__ import annotations

import pytest
import torch

from torch_nki import testing

SAMPLES = [s for op in testing.ops_with_reference() for s in testing.sample_inputs(op)]


@pytest.mark.parametrize("sample", SAMPLES, ids=str)
def test_matches_reference(sample: testing.SampleInput) -> None:
    actual = testing.call(sample)
    expected = testing.reference(sample)
    testing.assert_close(sample, actual, expected)


@pytest.mark.parametrize("sample", SAMPLES, ids=str)
def test_non_contiguous_inputs_give_the_same_bits(sample: testing.SampleInput) -> None:
    """Every tensor argument replaced by a strided view of the same values."""

    def strided(a: object) -> object:
        if not isinstance(a, torch.Tensor) or a.dim() == 0:
            return a
        wide = torch.empty((*a.shape[:-1], a.shape[-1] * 2), dtype=a.dtype)
        wide[..., ::2] = a
        view = wide[..., ::2]
        assert a.numel() <= 1 or not view.is_contiguous()
        return view

    args = tuple(strided(a) for a in sample.args)
    op = getattr(torch.ops.neuron, sample.op)
    for a, b in zip(testing.call(sample), testing.public_outputs(op(*args)), strict=True):
        assert torch.equal(a, b)


@pytest.mark.parametrize("op", testing.ops_with_reference())
def test_results_are_deterministic(op: str) -> None:
    sample = max(testing.sample_inputs(op), key=lambda s: sum(t.numel() for t in s.tensors))
    first = testing.call(sample)
    for _ in range(2):
        for a, b in zip(first, testing.call(sample), strict=True):
            assert torch.equal(a, b)


def test_default_scalars_and_keywords() -> None:
    """Scalars may be left out (schema defaults), passed positionally or by keyword."""
    for op in testing.ops_with_reference():
        spec = testing.op_spec(op)
        defaulted = [i for i, p in enumerate(spec.params) if not p.is_tensor and p.has_default]
        if not defaulted:
            continue
        sample = testing.sample_inputs(op, dtypes=[torch.float32])[0]
        packet = getattr(torch.ops.neuron, op)
        full = testing.call(sample)
        n_leading = defaulted[0]
        trimmed = [a for i, a in enumerate(sample.args) if i < n_leading]
        kwargs = {spec.params[i].name: sample.args[i] for i in defaulted}
        by_kw = testing.public_outputs(packet.default(*trimmed, **kwargs))
        for a, b in zip(full, by_kw, strict=True):
            assert torch.equal(a, b)
        if all(sample.args[i] == spec.params[i].default for i in defaulted):
            for a, b in zip(full, testing.public_outputs(packet(*trimmed)), strict=True):
                assert torch.equal(a, b)


def test_empty_tensors() -> None:
    """A sample with its first dimension set to 0 (in every tensor whose first dimension is that
    same size, so batch dims shared between tensors stay equal) returns empty outputs."""
    checked = 0
    for op in testing.ops_with_reference():
        spec = testing.op_spec(op)
        for sample in testing.sample_inputs(op, dtypes=[torch.float32]):
            first = sample.tensors[0]
            if first.dim() < 2:
                continue
            lead = first.shape[0]

            def emptied(a: object, lead: int = lead) -> object:
                if isinstance(a, torch.Tensor) and a.dim() >= 1 and a.shape[0] == lead:
                    return a.new_empty((0, *a.shape[1:]))
                return a

            args = tuple(emptied(a) for a in sample.args)
            try:
                expected = testing.reference(sample, args)
            except RuntimeError:
                continue  # the reference itself rejects it
            actual = testing.public_outputs(getattr(torch.ops.neuron, op)(*args))
            assert [a.shape for a in actual] == [e.shape for e in expected], (op, spec.location)
            checked += 1
            break
    assert checked > 0

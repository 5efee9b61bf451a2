"""Zero-copy sanity: outputs are fresh tensors, inputs are never written."""

from __future__ import annotations

import torch

from torch_nki import testing

from refs import rand

neuron = torch.ops.neuron


def _storage_range(t: torch.Tensor) -> tuple[int, int]:
    start = t.untyped_storage().data_ptr()
    return start, start + t.untyped_storage().nbytes()


def _disjoint(a: torch.Tensor, b: torch.Tensor) -> bool:
    (a0, a1), (b0, b1) = _storage_range(a), _storage_range(b)
    return a1 <= b0 or b1 <= a0


def test_outputs_are_fresh_and_inputs_unchanged() -> None:
    for op in testing.ops_with_reference():
        sample = testing.sample_inputs(op, dtypes=[torch.float32])[0]
        tensors = sample.tensors
        before = [t.clone() for t in tensors]
        outs = testing.call(sample)
        again = testing.call(sample)
        for out, out2 in zip(outs, again, strict=True):
            assert out.is_contiguous() and out.device.type == "cpu"
            assert all(_disjoint(out, t) for t in tensors), op
            assert _disjoint(out, out2) and torch.equal(out, out2)
        assert all(torch.equal(t, b) for t, b in zip(tensors, before, strict=True)), op


def test_same_tensor_twice_and_views_are_read_only() -> None:
    base = rand(16, 32)
    snapshot = base.clone()
    view = base[:, 8:24]
    out = neuron.add(view, view)
    torch.testing.assert_close(out, view * 2)
    assert torch.equal(base, snapshot)
    assert _disjoint(out, base)

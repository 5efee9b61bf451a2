"""Zero-copy sanity: outputs are fresh tensors, inputs are never written."""

from __future__ import annotations

import torch

from refs import rand

neuron = torch.ops.neuron


def _storage_range(t: torch.Tensor) -> tuple[int, int]:
    start = t.untyped_storage().data_ptr()
    return start, start + t.untyped_storage().nbytes()


def _disjoint(a: torch.Tensor, b: torch.Tensor) -> bool:
    (a0, a1), (b0, b1) = _storage_range(a), _storage_range(b)
    return a1 <= b0 or b1 <= a0


def test_outputs_are_fresh_and_inputs_unchanged() -> None:
    calls = [
        ("add", (rand(40, 50), rand(40, 50))),
        ("rmsnorm", (rand(40, 50), rand(50), 1e-6)),
        ("matmul", (rand(40, 50), rand(50, 30))),
    ]
    for op, args in calls:
        tensors = [a for a in args if isinstance(a, torch.Tensor)]
        before = [t.clone() for t in tensors]
        out = getattr(neuron, op)(*args)
        again = getattr(neuron, op)(*args)
        assert out.is_contiguous() and out.device.type == "cpu"
        assert all(_disjoint(out, t) for t in tensors), op
        assert _disjoint(out, again) and torch.equal(out, again)
        assert all(torch.equal(t, b) for t, b in zip(tensors, before, strict=True)), op


def test_same_tensor_twice_and_views_are_read_only() -> None:
    base = rand(16, 32)
    snapshot = base.clone()
    view = base[:, 8:24]
    out = neuron.add(view, view)
    torch.testing.assert_close(out, view * 2)
    assert torch.equal(base, snapshot)
    assert _disjoint(out, base)

"""Optional tensors (``Tensor?``) through the generated CPU and fake kernels: ``None`` reaches the
native contract check and the simulator call as ``None`` (no library op has an optional tensor
yet, so a recording stand-in plays the native module; the Rust side is tested in
``nki-macros/tests/kernels.rs``)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import torch

from torch_nki._kernels import make_cpu_kernel, make_fake_kernel
from torch_nki._manifest import _op


def _spec() -> Any:
    param = [
        {"name": "x", "kind": {"kind": "tensor"}},
        {"name": "bias", "kind": {"kind": "optional_tensor"}},
    ]
    out = {"name": "out", "saved": False, "shape": [], "dtype": {"kind": "same_as", "param": "x"}}
    return _op(
        {
            "name": "maybe_bias",
            "schema": "maybe_bias(Tensor x, Tensor? bias=None) -> Tensor",
            "doc": "Adds an optional bias.",
            "location": "here:1",
            "replaces": [],
            "params": param,
            "contract": {"inputs": [], "dtypes": [], "outputs": [out], "requires": []},
            "contract_text": "",
            "dtype_text": "",
            "samples": [],
            "tolerance": {"kind": "elementwise"},
            "autocast": "keep",
            "sharding": {"dims": [], "additive": [], "reads": []},
        }
    )


class RecordedSignature:
    """Answers like a native ``Signature`` of `maybe_bias` and records what it was given."""

    def __init__(self, calls: list[tuple[str, Any]], shapes: Sequence[Any], dtypes: Sequence[Any]) -> None:
        self.calls = calls
        self.shapes, self.dtypes = shapes, dtypes
        calls.append(("check", (list(shapes), list(dtypes))))

    def outputs(self) -> Any:
        return [(tuple(self.shapes[0]), self.dtypes[0])]

    def run(self, inputs: Sequence[Any], outputs: Sequence[Any]) -> None:
        self.calls.append(("run", [None if t is None else (tuple(t.shape), t.dtype) for t in inputs]))


class Recorder:
    """Answers like the native module for `maybe_bias` and records what it was given."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, Any]] = []

    def Signature(
        self, name: str, shapes: Sequence[Any], dtypes: Sequence[Any], scalars: Sequence[Any]
    ) -> RecordedSignature:
        return RecordedSignature(self.calls, shapes, dtypes)

    def symbolic(
        self, name: str, shapes: Sequence[Any], dtypes: Sequence[Any], scalars: Sequence[Any]
    ) -> str:
        self.calls.append(("symbolic", (list(shapes), list(dtypes))))
        dims = [{"kind": "dim", "tensor": 0, "axis": a} for a in range(len(shapes[0]))]
        return json.dumps({"shapes": [dims], "dtypes": [dtypes[0]], "checks": []})


def test_none_reaches_the_native_signature_and_run_as_none() -> None:
    native = Recorder()
    cpu = make_cpu_kernel(_spec(), native)
    out = cpu(torch.ones(3, 2))  # bias left to its default, None
    assert out.shape == (3, 2)
    assert native.calls == [
        ("check", ([torch.Size([3, 2]), None], ["f32", None])),
        ("run", [((3, 2), torch.float32), None]),
    ]
    native.calls.clear()
    cpu(torch.ones(3, 2), torch.ones(2))
    assert native.calls[0] == ("check", ([torch.Size([3, 2]), torch.Size([2])], ["f32", "f32"]))


def test_fake_kernel_takes_none() -> None:
    native = Recorder()
    fake = make_fake_kernel(_spec(), native)
    out = fake(torch.empty(4, 5, device="meta"), None)
    assert out.shape == (4, 5) and out.device.type == "meta"
    assert native.calls == [("check", ([(4, 5), None], ["f32", None]))]

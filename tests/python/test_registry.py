"""The registry as Python sees it: ops, manifest, schemas, autoload through `import torch`."""

from __future__ import annotations

import os
import subprocess
import sys

import torch

import torch_nki
from torch_nki import testing
from torch_nki._dtypes import caller_name
from torch_nki._manifest import MANIFEST_VERSION


def _python(code: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        env={**os.environ, **env},
        timeout=300,
        check=False,
    )


def test_ops_and_manifest() -> None:
    assert torch_nki.ops() == sorted(torch_nki._native.names())
    manifest = torch_nki.manifest()
    assert manifest["version"] == MANIFEST_VERSION
    by_name = {op["name"]: op for op in manifest["ops"]}
    assert set(by_name) == set(torch_nki.ops())
    rms = by_name["rmsnorm"]
    assert rms["schema"] == "rmsnorm(Tensor x, Tensor weight, float eps=1e-06) -> Tensor"
    assert rms["forward_op"] == {
        "name": "rmsnorm_fwd",
        "schema": "rmsnorm_fwd(Tensor x, Tensor weight, float eps=1e-06) -> (Tensor, Tensor)",
    }
    # rmsnorm_backward(grad_y, x, weight, rstd) -> (grad_x, grad_weight), by position.
    assert rms["backward"] == {
        "kernel": "rmsnorm_backward",
        "saves": ["x", "weight", "rstd"],
        "saved": [
            {"kind": "input", "param": 0},
            {"kind": "input", "param": 1},
            {"kind": "output", "output": 1},
        ],
        "args": [
            {"kind": "grad", "output": 0},
            {"kind": "saved", "slot": 0},
            {"kind": "saved", "slot": 1},
            {"kind": "saved", "slot": 2},
        ],
        "grads": [0, 1],
    }
    assert by_name["rmsnorm_backward"]["backward_of"] == "rmsnorm"
    assert rms["contract_text"] == (
        "x[..B, D], weight[D] -> (y[..B, D], saved rstd[..B]), require(D >= 1), require(D <= 16384)"
    )
    assert rms["dtype_text"] == "x in {f32, bf16, f16}, weight = x -> (x, f32)"
    assert "*RMSNorm" in rms["replaces"]
    assert rms["location"].startswith("kernels/src/norm/rmsnorm.rs:")
    count = len(manifest["ops"])
    manifest["ops"].clear()  # a copy: the registry is unaffected
    assert len(torch_nki.manifest()["ops"]) == count


def test_every_forward_has_a_reference_and_samples_that_pass_the_contract() -> None:
    for op in torch_nki.ops():
        spec = testing.op_spec(op)
        if spec.backward_of:
            assert spec.reference is None and not spec.samples, op
            assert testing.op_spec(spec.backward_of).backward.kernel == op  # type: ignore[union-attr]
            continue
        assert spec.reference and spec.samples, f"{op} ({spec.location}) has no reference(...) or sample(...)"
        for sample in testing.sample_inputs(op):
            pairs = list(zip(spec.params, sample.args, strict=True))
            tensors = [a for p, a in pairs if p.is_tensor]  # None for an optional tensor left out
            scalars = [a for p, a in pairs if not p.is_tensor]
            shapes = [None if t is None else t.shape for t in tensors]
            names = [None if t is None else caller_name(t.dtype) for t in tensors]
            torch_nki._native.Signature(op, shapes, names, scalars)


def test_torch_schemas_come_from_the_manifest() -> None:
    for op in torch_nki.manifest()["ops"]:
        packet = getattr(torch.ops.neuron, op["name"])
        assert packet.default._schema == torch._C.parse_schema(f"neuron::{op['schema']}")
        assert torch.Tag.pt2_compliant_tag in packet.default.tags


def test_cache_grows_once_per_signature() -> None:
    x = torch.ones(3, 77)
    torch.ops.neuron.add(x, x)
    size = torch_nki.cache_size()
    torch.ops.neuron.add(x, x)
    assert torch_nki.cache_size() == size
    torch.ops.neuron.add(torch.ones(3, 78), torch.ones(3, 78))
    assert torch_nki.cache_size() == size + 1


def test_import_torch_alone_registers_the_ops() -> None:
    code = (
        "import sys, torch; "
        "print('torch_nki' in sys.modules, torch.ops.neuron.add(torch.ones(2), torch.ones(2)))"
    )
    result = _python(code)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "True tensor([2., 2.])"


def test_import_torch_nki_first() -> None:
    code = (
        "import torch_nki, torch; "
        "print(torch_nki.ops(), torch.ops.neuron.matmul(torch.ones(1, 2), torch.ones(2, 1)))"
    )
    result = _python(code)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == f"{torch_nki.ops()} tensor([[2.]])"


def test_autoload_can_be_disabled() -> None:
    code = "import sys, torch; print('torch_nki' in sys.modules, hasattr(torch.ops.neuron, 'add'))"
    result = _python(code, TORCH_DEVICE_BACKEND_AUTOLOAD="0")
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "False False"


def test_name_clash_raises_on_explicit_import() -> None:
    code = (
        "import torch\n"
        "lib = torch.library.Library('neuron', 'FRAGMENT')\n"
        "lib.define('add(Tensor a) -> Tensor')\n"
        "try:\n"
        "    import torch_nki\n"
        "except RuntimeError as err:\n"
        "    print('raised:', err)\n"
    )
    result = _python(code, TORCH_DEVICE_BACKEND_AUTOLOAD="0")
    assert result.returncode == 0, result.stderr
    expected = (
        "raised: torch_nki: cannot register neuron::add from torch_nki._native (defined at kernels/src/"
    )
    assert result.stdout.startswith(expected)


def test_failure_during_torch_autoload_is_a_warning() -> None:
    # Simulate torch's autoload (torch still initialising) with a registration that must fail.
    code = (
        "import warnings, torch\n"
        "lib = torch.library.Library('neuron', 'FRAGMENT')\n"
        "lib.define('add(Tensor a) -> Tensor')\n"
        "torch.__spec__._initializing = True\n"
        "with warnings.catch_warnings(record=True) as caught:\n"
        "    warnings.simplefilter('always')\n"
        "    import torch_nki\n"
        "torch.__spec__._initializing = False\n"
        "print([str(w.message)[:80] for w in caught])\n"
        "try:\n"
        "    torch_nki.ops()\n"
        "except ImportError as err:\n"
        "    print('ops() raised:', str(err)[:80])\n"
    )
    result = _python(code, TORCH_DEVICE_BACKEND_AUTOLOAD="0")
    assert result.returncode == 0, result.stderr
    assert "torch_nki: registering torch.ops.neuron.* failed during" in result.stdout
    assert "ops() raised: torch_nki failed to load: torch_nki: cannot" in result.stdout

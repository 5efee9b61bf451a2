"""The installed wheel on a machine without the toolchain: ``scripts/wheel_smoke.sh`` installs a
wheel of ``scripts/build_wheel.sh`` into a fresh virtualenv and runs this module there with PATH
holding only the virtualenv's ``bin`` and a directory of core utilities (no cargo, no C++
compiler). The fast C++ kernels must then be the wheel's prebuilt ones, loaded with no warning,
and eager calls, autograd, ``torch.compile(backend="aot_eager")``, swap, emit, cost, the NKI
frontend and the CLI must work. Not part of ``tests/python`` (a development install compiles its
own fast library and has the toolchain).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
import torch.nn.functional as F

import torch_nki
from torch_nki import _fast, nki, testing

PACKAGE = Path(torch_nki.__file__).resolve().parent
TOOLCHAIN = ("c++", "g++", "gcc", "cc", "clang", "cargo", "rustc")


def _python(code: str, **env: str) -> subprocess.CompletedProcess[str]:
    cmd = [sys.executable, "-c", code]
    return subprocess.run(cmd, capture_output=True, text=True, env={**os.environ, **env}, check=False)


def test_runs_from_an_installed_wheel_without_the_toolchain() -> None:
    assert "site-packages" in PACKAGE.parts, f"torch_nki comes from {PACKAGE}, not an installed wheel"
    found = {tool: shutil.which(tool) for tool in TOOLCHAIN if shutil.which(tool)}
    assert not found, f"the toolchain is on PATH: {found} (run this through scripts/wheel_smoke.sh)"
    assert "CXX" not in os.environ


def test_the_fast_path_is_the_wheels_prebuilt_library() -> None:
    assert _fast.enabled(), "the fast C++ kernels did not load"
    path = _fast.library_path()
    assert path is not None and path.parent == PACKAGE
    assert path.name == _fast.prebuilt_name(), path.name
    assert f"-torch{_fast.torch_minor()}-" in path.name
    assert torch._C._dispatch_has_kernel_for_dispatch_key("neuron::add", "AutogradCPU")
    assert torch_nki._registration().fast


def test_import_prints_nothing() -> None:
    code = (
        "import torch_nki\nfrom torch_nki import _fast\nprint(_fast.enabled(), _fast.library_path().name)\n"
    )
    result = _python(code, PYTHONWARNINGS="always")
    assert result.returncode == 0, result.stderr
    assert result.stderr == ""
    assert result.stdout.strip() == f"True {_fast.prebuilt_name()}"


def test_another_torch_minor_takes_the_python_kernels_with_one_line(tmp_path: Path) -> None:
    """The same package whose prebuilt library is for another torch minor (renamed to 9.99):
    no compiler to build one, so the Python kernels run, saying so in one line."""
    copy = tmp_path / "torch_nki"
    shutil.copytree(PACKAGE, copy, ignore=shutil.ignore_patterns("__pycache__"))
    ours = copy / _fast.prebuilt_name()
    ours.rename(copy / _fast.prebuilt_name("9.99"))
    code = (
        "import torch, torch_nki\n"
        "from torch_nki import _fast\n"
        "x = torch.rand(4, 4)\n"
        "assert torch.equal(torch.ops.neuron.add(x, x), x + x)\n"
        f"assert torch_nki.__file__.startswith({str(copy)!r})\n"
        "print(_fast.enabled())\n"
    )
    result = _python(code, PYTHONPATH=str(tmp_path))
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "False"
    lines = result.stderr.splitlines()
    assert len(lines) == 1, result.stderr
    assert "RuntimeWarning" in lines[0]
    assert f"built for torch 9.99, this is torch {torch.__version__}" in lines[0]
    assert f"install the torch-nki wheel built for torch {_fast.torch_minor()}" in lines[0]


def test_eager_calls_match_aten() -> None:
    x, w = torch.randn(300, 1000), torch.randn(1000)
    want = F.rms_norm(x, (1000,), w, 1e-6)
    torch.testing.assert_close(torch.ops.neuron.rmsnorm(x, w, 1e-6), want, rtol=1e-5, atol=1e-5)
    a, b = torch.randn(64, 96), torch.randn(96, 40)
    torch.testing.assert_close(torch.ops.neuron.matmul(a, b), a @ b, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("op", testing.ops_with_reference())
def test_every_op_eager_and_aot_eager_compiled(op: str) -> None:
    """Every op with a reference, on its smallest sample: eager against the reference, and
    ``torch.compile(backend="aot_eager", fullgraph=True)`` (Inductor needs a C++ compiler)
    bit for bit against eager."""
    sample = min(testing.sample_inputs(op), key=lambda s: sum(t.numel() for t in s.tensors))
    eager = testing.call(sample)
    testing.assert_close(sample, eager, testing.reference(sample))
    torch._dynamo.reset()
    packet = getattr(torch.ops.neuron, op)
    compiled = torch.compile(lambda *args: packet(*args), backend="aot_eager", fullgraph=True)
    for got, want in zip(testing.public_outputs(compiled(*sample.args)), eager, strict=True):
        torch.testing.assert_close(got, want, rtol=0, atol=0)


def test_autograd_through_an_aot_eager_graph() -> None:
    x = torch.randn(8, 64, requires_grad=True)
    w = torch.randn(64, requires_grad=True)
    x2, w2 = x.detach().clone().requires_grad_(), w.detach().clone().requires_grad_()

    def f(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
        return torch.ops.neuron.rmsnorm(x, w, 1e-6).relu().sum()

    torch._dynamo.reset()
    torch.compile(f, backend="aot_eager", fullgraph=True)(x, w).backward()
    F.rms_norm(x2, (64,), w2, 1e-6).relu().sum().backward()
    assert x.grad is not None and w.grad is not None
    torch.testing.assert_close(x.grad, x2.grad, rtol=1e-4, atol=1e-5)
    torch.testing.assert_close(w.grad, w2.grad, rtol=1e-4, atol=1e-5)


def test_swap_on_a_tiny_llama() -> None:
    from torch_nki import workflow

    model, ids = workflow.build("llama-tiny", torch.float32)
    with torch.no_grad():
        before = model(ids).logits
        report = torch_nki.profile(model, ids)
        swap = torch_nki.swap(model, report)
        assert swap.swapped and not swap.reverted, swap.to_markdown()
        after = model(ids).logits
    torch.testing.assert_close(after, before, rtol=2e-3, atol=2e-3)
    assert torch_nki.unswap(model) == len(swap.swapped)


def test_emit_and_cost() -> None:
    x, w = torch.empty(256, 512, device="meta"), torch.empty(512, device="meta")
    source = torch_nki.emit("rmsnorm", x, w, 1e-6)
    assert "import nki" in source and "def " in source
    report = torch_nki.cost("rmsnorm", x, w, 1e-6, target="trn2")
    assert report.total_ns > 0 and report.hbm_read_bytes >= 256 * 512 * 4


def test_the_nki_frontend_runs_a_kernel() -> None:
    source = """
import nki
import nki.language as nl


@nki.jit
def add_one(x):
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    t = nl.load(x)
    nl.store(out, value=nl.add(t, 1.0))
    return out
"""
    kernel = nki.load_source(source, "add_one").add_one
    x = np.random.default_rng(0).uniform(-1, 1, (128, 64)).astype(np.float32)
    np.testing.assert_array_equal(nki.simulate(kernel)(x), x + 1.0)


def test_the_cli_lists_the_registry() -> None:
    cli = Path(sys.executable).parent / "torch-nki"
    result = subprocess.run([str(cli), "list"], capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stderr
    for op in torch_nki.ops():
        assert f"torch.ops.neuron.{op}\n" in result.stdout

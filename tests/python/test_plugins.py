"""Out-of-tree kernel crates: the template crate (``examples/kernel-crate``) is built with cargo
and loaded with ``torch_nki.load``; its ops behave like the built-in ones (eager against the
declared reference, ``torch.compile(fullgraph=True)``, autograd against torch's, listed by
``torch_nki.ops()`` and ``torch-nki list``, errors as ``torch_nki.NkiError`` subclasses), a
module kind and a graph pattern of the user's own swap in with its kernel, and loading refuses
what it must."""

from __future__ import annotations

import operator
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import torch

import torch_nki
from torch_nki import cli, compiler, plugins, testing
from torch_nki.compiler import Rewriter

CRATE = Path(__file__).resolve().parents[2] / "examples" / "kernel-crate"
NS = "nki_example"
OP = f"{NS}::residual_rmsnorm"


@pytest.fixture(scope="module")
def library() -> Path:
    return plugins.build(CRATE)


@pytest.fixture(scope="module")
def loaded(library: Path) -> Iterator[plugins.LoadedModule]:
    module = torch_nki.load(library, namespace=NS)
    yield module
    plugins.unload(module)  # the other suites see exactly the built-in ops
    assert not any(op.startswith(f"{NS}::") for op in torch_nki.ops())
    # The definition stays (handles to it must not dangle); its kernels are gone.
    with pytest.raises(torch_nki.PluginError, match=rf"^{NS}::residual_rmsnorm was unloaded \(torch_nki"):
        getattr(torch.ops, NS).residual_rmsnorm(torch.ones(1, 1), torch.ones(1, 1), torch.ones(1))


def test_loading_registers_the_crates_kernels(
    loaded: plugins.LoadedModule, capsys: pytest.CaptureFixture[str]
) -> None:
    assert loaded.name == "residual_kernels" and loaded.namespace == NS
    assert loaded.ops == ["residual_rmsnorm", "residual_rmsnorm_backward", "residual_rmsnorm_fwd"]
    assert {f"{NS}::residual_rmsnorm", f"{NS}::residual_rmsnorm_backward"} <= set(torch_nki.ops())
    assert torch_nki.load(CRATE, namespace=NS) is loaded  # loading again is a no-op
    assert cli.main(["list"]) == 0
    out = capsys.readouterr().out
    assert f"residual_kernels ({loaded.path}): 2 ops in torch.ops.{NS}" in out
    assert f"torch.ops.{NS}.residual_rmsnorm\n" in out


@pytest.mark.usefixtures("loaded")
def test_eager_matches_the_declared_reference() -> None:
    samples = testing.sample_inputs(OP)
    assert len(samples) >= 9
    for sample in samples:
        testing.assert_close(sample, testing.call(sample), testing.reference(sample))


@pytest.mark.usefixtures("loaded")
def test_compiles_fullgraph_and_matches_eager() -> None:
    sample = testing.sample_inputs(OP, dtypes=[torch.float32])[1]
    op = getattr(torch.ops, NS).residual_rmsnorm
    compiled = torch.compile(lambda *a: op(*a), fullgraph=True, dynamic=False)
    for got, want in zip(compiled(*sample.args), op(*sample.args), strict=True):
        assert torch.equal(got, want)


@pytest.mark.usefixtures("loaded")
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_gradients_match_torch_autograd(dtype: torch.dtype) -> None:
    for sample in testing.sample_inputs(OP, dtypes=[dtype], requires_grad=True):
        h, y = testing.call(sample)
        g_h, g_y = torch.randn_like(h), torch.randn_like(y)
        got = torch.autograd.grad((h, y), sample.tensors, (g_h, g_y))
        ref_args = [
            a.detach().clone().requires_grad_(True) if isinstance(a, torch.Tensor) else a for a in sample.args
        ]
        h_ref, y_ref = testing.reference(sample, ref_args)
        tensors = [a for a in ref_args if isinstance(a, torch.Tensor)]
        want = torch.autograd.grad((h_ref, y_ref), tensors, (g_h, g_y))
        (rtol, atol), _ = testing.tolerances(sample)
        for g, w in zip(got, want, strict=True):
            scale = max(1.0, float(w.float().abs().max()))
            torch.testing.assert_close(
                g.float(), w.float(), rtol=4 * rtol, atol=4 * atol * scale, msg=str(sample)
            )


class ResidualRMSNorm(torch.nn.Module):
    """A user's module that the crate's kernel computes (its ``replaces("*ResidualRMSNorm")``
    names it): the residual add and an RMSNorm of the sum, returning ``(y, h)``."""

    def __init__(self, d: int) -> None:
        super().__init__()
        self.weight = torch.nn.Parameter(torch.rand(d, generator=torch.Generator().manual_seed(1)) + 0.5)
        self.eps = 1e-6

    def forward(self, x: torch.Tensor, residual: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        h = x + residual
        y = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight
        return y, h


def _residual_forward(module: Any, x: torch.Tensor, residual: torch.Tensor) -> Any:
    h, y = getattr(torch.ops, NS).residual_rmsnorm(x, residual, module.weight, module.eps)
    return y, h


def _residual_example(module: Any, generator: torch.Generator) -> tuple[tuple[Any, ...], dict[str, Any]]:
    d = module.weight.shape[0]
    return (torch.randn(2, 3, d, generator=generator), torch.randn(2, 3, d, generator=generator)), {}


def _residual_rmsnorm_pattern(rw: Rewriter) -> None:
    """``neuron.rmsnorm(x + residual, w, eps)`` (what the built-in rmsnorm pattern made of the
    decomposition) → the crate's fused kernel."""
    for node in rw.calls(torch.ops.neuron.rmsnorm.default):
        h, weight, eps = node.args
        if rw.is_call(h, operator.add, torch.add) and isinstance(eps, float):
            x, residual = h.args
            rw.attempt(
                node, getattr(torch.ops, NS).residual_rmsnorm.default, (x, residual, weight, eps), take=1
            )


@pytest.mark.usefixtures("loaded", "dynamo")
def test_a_crates_own_module_kind_and_graph_pattern_swap_in() -> None:
    kind = torch_nki.register_adapter(
        torch_nki.Adapter(
            "ResidualRMSNorm",
            (OP,),
            recognise=lambda m: isinstance(getattr(m, "eps", None), float),
            forward=_residual_forward,
            example=_residual_example,
        )
    )
    pattern = torch_nki.register_pattern(
        torch_nki.Pattern("residual + rmsnorm", (OP,), _residual_rmsnorm_pattern)
    )
    try:
        model = torch.nn.Sequential(ResidualRMSNorm(96))
        x, residual = torch.randn(4, 96), torch.randn(4, 96)
        with torch.no_grad():
            want = model[0](x, residual)
        report = torch_nki.swap(model)
        (entry,) = report.entries
        assert (entry.kind, entry.kernels, entry.status) == (kind.kind, (OP,), "swapped"), (
            report.to_markdown()
        )
        with torch.no_grad(), torch_nki.hotspots.record_neuron_calls() as calls:
            got = model[0](x, residual)
        assert [op for op, _ in calls] == [OP]
        for g, w in zip(got, want, strict=True):
            torch.testing.assert_close(g, w, rtol=1e-5, atol=1e-5)
        torch_nki.unswap(model)

        def block(
            x: torch.Tensor, residual: torch.Tensor, w: torch.Tensor
        ) -> tuple[torch.Tensor, torch.Tensor]:
            h = x + residual
            n = h.to(torch.float32)
            n = n * torch.rsqrt(n.pow(2).mean(-1, keepdim=True) + 1e-6)
            return w * n.to(h.dtype), h * 2

        w = torch.rand(96) + 0.5
        compiled = torch.compile(block, backend="nki", fullgraph=True)(x, residual, w)
        for g, e in zip(compiled, block(x, residual, w), strict=True):
            torch.testing.assert_close(g, e, rtol=1e-5, atol=1e-5)
        log = [(d.pattern, d.rewritten) for d in compiler.last_log()]
        assert log == [("rmsnorm", True), ("residual + rmsnorm", True)]
    finally:
        torch_nki.unregister_adapter(kind.kind)
        torch_nki.unregister_pattern(pattern.name)


def test_cli_commands_include_the_loaded_crates_ops(
    loaded: plugins.LoadedModule, library: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``--load`` ops run in ``demo`` and are rows of ``table``, next to the built-in ones."""
    assert cli.main(["--load", f"{library}={NS}", "demo", "--no-compile", "--repeat", "1"]) == 0
    out = capsys.readouterr().out
    demo_rows = [line.split() for line in out.splitlines() if line.startswith(f"{NS}::")]
    assert [row[:2] for row in demo_rows] == [
        [f"{NS}::residual_rmsnorm", "float32"],
        [f"{NS}::residual_rmsnorm", "bfloat16"],
    ]
    assert all("eager" in row and "PASS" in row for row in demo_rows)
    assert any(line.startswith("rmsnorm ") for line in out.splitlines())  # the built-in ones too
    assert cli.main(["table"]) == 0
    table = capsys.readouterr().out
    for op in loaded.registration.ops:
        assert f"| `{NS}::{op}` |" in table


@pytest.mark.usefixtures("loaded")
def test_errors_are_nki_errors_naming_the_namespaced_op() -> None:
    op = getattr(torch.ops, NS).residual_rmsnorm
    x = torch.rand(4, 8)
    expected = rf"^{NS}::residual_rmsnorm: weight has shape \[5\]"
    with pytest.raises(torch_nki.ContractShapeError, match=expected):
        op(x, x, torch.rand(5))
    with pytest.raises(torch_nki.ContractShapeError, match=r"requires D <= 4096"):
        op(torch.rand(2, 4097), torch.rand(2, 4097), torch.rand(4097))


def test_loading_refuses_what_it_must(loaded: plugins.LoadedModule, library: Path, tmp_path: Path) -> None:
    with pytest.raises(torch_nki.PluginError, match=f"already loaded into torch.ops.{NS}"):
        torch_nki.load(library, namespace="elsewhere")
    with pytest.raises(torch_nki.PluginError, match="does not exist"):
        torch_nki.load(tmp_path / "nope.so")
    with pytest.raises(torch_nki.PluginError, match=r"has no Cargo\.toml"):
        torch_nki.load(tmp_path)
    bogus = tmp_path / "libbogus.so"
    bogus.write_bytes(b"not a library")
    with pytest.raises(torch_nki.PluginError, match="not a torch-nki kernel module"):
        torch_nki.load(bogus)
    with pytest.raises(torch_nki.PluginError, match="'my-ns' is not a Python identifier"):
        torch_nki.load(library, namespace="my-ns")


@pytest.mark.usefixtures("loaded")
def test_cost_and_emit_see_the_crates_kernels(capsys: pytest.CaptureFixture[str]) -> None:
    meta = [torch.empty(s, device="meta") for s in ([8, 4], [8, 4], [4])]
    report = torch_nki.cost(OP, *meta)
    assert report.op == OP and report.total_ns > 0 and report.instructions > 0
    assert "@nki.jit" in torch_nki.emit(OP, *meta)
    shapes = ["--shape", "x=8x4", "--shape", "residual=8x4", "--shape", "weight=4"]
    assert cli.main(["cost", OP, *shapes]) == 0
    assert cli.main(["emit", OP, *shapes]) == 0
    out = capsys.readouterr().out
    assert "def residual_rmsnorm(" in out


def _python(code: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env={**os.environ, **env}, check=False
    )


def test_default_namespace_version_mismatch_and_name_clash_in_fresh_processes(library: Path) -> None:
    # Into torch.ops.neuron, next to the built-in ops; loading it into a second namespace under
    # another file name clashes with nothing, but the same names in neuron twice do.
    code = (
        "import torch, torch_nki\n"
        f"m = torch_nki.load({str(library)!r})\n"
        "x = torch.rand(3, 8)\n"
        "h, y = torch.ops.neuron.residual_rmsnorm(x, x, torch.ones(8))\n"
        "print(sorted(torch_nki.ops()))\n"
        "import torch_nki.plugins as p, torch_nki._native as n\n"
        "n_versions = n.versions\n"
        "import types\n"
        "fake = types.SimpleNamespace(__name__='fake', versions=lambda: (1, '9.9.9'))\n"
        "try:\n"
        f"    p._check_versions(fake, {str(library)!r})\n"
        "except torch_nki.PluginError as e:\n"
        "    print('version:', e)\n"
    )
    result = _python(code)
    assert result.returncode == 0, result.stderr
    assert "'residual_rmsnorm'" in result.stdout and "'rmsnorm'" in result.stdout
    expected = "built against nki-core 9.9.9 (module protocol 1), but this torch_nki uses nki-core"
    assert expected in result.stdout

    clash = (
        "import torch, torch_nki, torch_nki._register as r, torch_nki._native as n\n"
        "lib = torch.library.Library('neuron', 'FRAGMENT')\n"
        "lib.define('residual_rmsnorm(Tensor a) -> Tensor')\n"
        "try:\n"
        f"    torch_nki.load({str(library)!r})\n"
        "except torch_nki.PluginError as e:\n"
        "    print('clash:', e)\n"
    )
    result = _python(clash)
    assert result.returncode == 0, result.stderr
    assert "cannot register neuron::residual_rmsnorm from" in result.stdout
    assert "torch.ops.neuron.residual_rmsnorm already exists" in result.stdout


def test_a_missing_cargo_is_a_clear_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(shutil, "which", lambda name: None)
    with pytest.raises(torch_nki.PluginError, match="needs cargo, which is not on PATH"):
        plugins.build(CRATE)


def test_a_library_loaded_twice_is_the_same_module_or_a_clash(library: Path, tmp_path: Path) -> None:
    """A copy at another path is the first load; other contents under the same module name (a
    different crate with the same [lib] name, the crate rebuilt with other code, at another path
    or at the same one) are refused, naming both files, instead of running the first one's code."""
    first, copy, other = (tmp_path / d / library.name for d in ("first", "copy", "other"))
    for path in (first, copy, other):
        path.parent.mkdir()
        shutil.copy(library, path)
    with other.open("ab") as f:
        f.write(b"other code")
    code = (
        "import sys, torch_nki\n"
        "first, copy, other = sys.argv[1:]\n"
        "m = torch_nki.load(first, namespace='dup')\n"
        "print('same:', torch_nki.load(copy, namespace='dup') is m)\n"
        "for path, ns in ((copy, 'elsewhere'), (other, 'dup'), (other, 'elsewhere')):\n"
        "    try:\n"
        "        torch_nki.load(path, namespace=ns)\n"
        "    except torch_nki.PluginError as e:\n"
        "        print('refused:', e)\n"
        "with open(first, 'ab') as f:\n"
        "    f.write(b'rebuilt')\n"
        "try:\n"
        "    torch_nki.load(first, namespace='dup')\n"
        "except torch_nki.PluginError as e:\n"
        "    print('refused:', e)\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code, str(first), str(copy), str(other)],
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0] == "same: True"
    assert lines[1] == f"refused: torch_nki.load: {first} is already loaded into torch.ops.dup"
    clash = f"refused: torch_nki.load: {other} defines module residual_kernels, already loaded from {first} "
    assert lines[2].startswith(clash + "with other contents; a process holds one library per module name")
    assert lines[3].startswith(clash)
    assert lines[4].startswith(f"refused: torch_nki.load: {first} was rebuilt since it was loaded; ")
    assert len(lines) == 5

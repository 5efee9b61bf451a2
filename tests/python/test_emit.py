"""``torch_nki.emit`` and ``torch-nki emit``: NKI Python source for every op with a reference, at
its largest declared sample, on every target (iterates the registry)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import torch

import torch_nki
from torch_nki import cli, testing


def _meta_args(op: str) -> list[object]:
    samples = testing.sample_inputs(op, dtypes=[torch.float32])
    largest = max(samples, key=lambda s: sum(t.numel() for t in s.tensors))
    return [a.to("meta") if isinstance(a, torch.Tensor) else a for a in largest.args]


@pytest.mark.parametrize("target", ["trn1", "trn2", "trn3"])
@pytest.mark.parametrize("op", testing.ops_with_reference())
def test_every_op_emits_python_that_parses_and_passes_ruff(op: str, target: str, tmp_path: Path) -> None:
    source = torch_nki.emit(op, *_meta_args(op), target=target)
    assert "@nki.jit\n" in source and f" for {target}," in source
    compile(source, f"{op}.py", "exec")  # valid Python
    path = tmp_path / f"{op}.py"
    path.write_text(source)
    lint = subprocess.run(
        [sys.executable, "-m", "ruff", "check", "--no-cache", "--isolated", str(path)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert lint.returncode == 0, lint.stdout + lint.stderr
    # Every instruction line names the Rust line it came from.
    calls = [line for line in source.splitlines() if line.strip().startswith("nisa.")]
    assert calls and all("  # kernels/src/" in line for line in calls)


def test_emit_is_stable_and_follows_the_signature() -> None:
    x, w = torch.empty(300, 64, device="meta"), torch.empty(64, device="meta")
    a = torch_nki.emit("rmsnorm", x, w)
    assert a == torch_nki.emit("rmsnorm", x, w, eps=1e-6)
    assert torch_nki.emit("rmsnorm", x.to(torch.bfloat16), w.to(torch.bfloat16)) != a
    # One core (Trn1): two full row tiles in one loop, then the tail.
    one = torch_nki.emit("rmsnorm", x, w, target="trn1")
    assert "LAUNCH_GRID" not in one
    assert "nl.affine_range(2)" in one and "x[256:300, 0:64]" in one
    # A Trn2 logical core: launched on both cores, core 0 taking the first row tile, core 1 the
    # second and the tail.
    assert "LAUNCH_GRID = (2,)" in a
    core0, core1 = a.split("if nl.program_id(0) == 0:")[1].split("if nl.program_id(0) == 1:")
    assert "nl.affine_range(1)" in core0 and "x[256:300, 0:64]" not in core0
    assert "nl.affine_range(1)" in core1 and "x[256:300, 0:64]" in core1


def test_emit_errors_name_the_problem() -> None:
    with pytest.raises(torch_nki.ContractShapeError, match="weight has shape"):
        torch_nki.emit("rmsnorm", torch.empty(4, 8, device="meta"), torch.empty(9, device="meta"))
    with pytest.raises(ValueError, match="unknown target `trn9`"):
        torch_nki.emit("add", torch.ones(2), torch.ones(2), target="trn9")
    with pytest.raises(KeyError, match="no kernel named `nope`"):
        torch_nki.emit("nope")


def test_cli_emit_prints_or_writes_the_source(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["emit", "rmsnorm", "--shape", "x=300x1000", "--shape", "weight=1000", "--dtype", "bf16"]
    assert cli.main(argv) == 0
    printed = capsys.readouterr().out
    assert printed.startswith('"""`rmsnorm` for trn2') and "dtype=nl.bfloat16" in printed
    out = tmp_path / "rmsnorm_nki.py"
    assert cli.main([*argv, "-o", str(out)]) == 0
    assert out.read_text() == printed
    assert cli.main(["emit", "nope"]) == 2
    assert "no kernel named `nope`" in capsys.readouterr().out
    assert cli.main(["emit", "add", "--shape", "x=4x4", "--shape", "y=4x4", "--dtype", "f64x"]) == 2
    assert "unknown dtype `f64x`" in capsys.readouterr().out

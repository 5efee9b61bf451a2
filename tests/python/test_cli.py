"""The torch-nki command line."""

from __future__ import annotations

import subprocess
import sys

import pytest

from torch_nki import cli


def test_list(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["list"]) == 0
    out = capsys.readouterr().out
    assert "3 ops in torch.ops.neuron" in out
    assert "rmsnorm(Tensor x, Tensor weight, float eps=1e-06) -> Tensor" in out
    assert "contract: x[N, D], weight[D] -> [N, D], require(D <= 16384)" in out
    assert "contract: x[..S, D], y[..S, D] -> [..S, D]" in out
    assert "defined:  kernels/src/matmul.rs:" in out
    assert "doc:      Matrix product" in out


def test_demo_eager(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["demo", "--no-compile", "--repeat", "1"]) == 0
    out = capsys.readouterr().out
    assert out.count("PASS") == 6 and "FAIL" not in out
    assert "all checks passed" in out


@pytest.mark.usefixtures("dynamo")
def test_python_dash_m_demo_with_compile() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "torch_nki", "demo", "--repeat", "1"],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.count("PASS") == 12

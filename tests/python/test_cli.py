"""The torch-nki command line."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import torch

import torch_nki
from torch_nki import cli, demo, testing


def test_list(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["list"]) == 0
    out = capsys.readouterr().out
    assert f"{len(torch_nki.ops())} ops in torch.ops.neuron" in out
    for op in torch_nki.ops():
        spec = testing.op_spec(op)
        assert f"\ntorch.ops.neuron.{op}\n  schema:   {spec.schema}\n" in out
        assert f"  defined:  {spec.location}\n" in out
        assert f"  doc:      {spec.summary}\n" in out
        if spec.backward:
            assert f"  backward: {spec.backward.kernel} (saves " in out
    contract = "x[..B, D], weight[D] -> (y[..B, D], saved rstd[..B]), require(D >= 1), require(D <= 16384)"
    assert f"contract: {contract}" in out


def _demo_rows(out: str) -> int:
    return sum(
        1 for op in testing.ops_with_reference() for line in out.splitlines() if line.startswith(f"{op} ")
    )


def test_demo_eager(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["demo", "--no-compile", "--repeat", "1"]) == 0
    out = capsys.readouterr().out
    rows = _demo_rows(out)
    assert rows >= len(testing.ops_with_reference())
    assert out.count("PASS") == rows and "FAIL" not in out
    assert "all checks passed" in out


def test_demo_names_the_failed_checks_last(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    op = testing.ops_with_reference()[0]
    monkeypatch.setattr(demo.testing, "ops_with_reference", lambda: [op])
    monkeypatch.setattr(demo, "_within", lambda sample, actual, expected: sample.dtype != torch.float32)
    assert cli.main(["demo", "--no-compile", "--repeat", "1"]) == 1
    last = capsys.readouterr().out.strip().splitlines()[-1]
    assert last.startswith(f"1 check(s) FAILED: {op} float32 eager (")


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
    rows = _demo_rows(result.stdout)
    assert rows > 0 and result.stdout.count("PASS") == rows
    assert sum("compile" in line for line in result.stdout.splitlines()) == rows // 2


def test_conformance_of_a_missing_path_is_a_usage_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    missing = tmp_path / "no-such-corpus"
    assert cli.main(["conformance", str(missing)]) == 2
    assert capsys.readouterr().out == f"torch-nki conformance: {missing}: no such file or directory\n"
    with pytest.raises(SystemExit) as exit_info:
        cli.main(["conformance", str(tmp_path), "--timeout", "0"])
    assert exit_info.value.code == 2
    assert "--timeout: expected a number of seconds above 0, got '0'" in capsys.readouterr().err

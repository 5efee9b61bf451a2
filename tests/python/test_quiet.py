"""The tools print only their own output: what other libraries write straight to the process's
file descriptors while torch-nki calls them (the profiler's C++ log lines) is captured, ``-v``
shows it, progress bars stay; ``torch-nki fast`` builds the C++ kernels without ``runpy``'s
warning."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from torch_nki import _quiet

ROOT = Path(__file__).resolve().parents[2]


def _cli(*args: str, **env: str) -> subprocess.CompletedProcess[str]:
    environment = {**os.environ, **env}
    environment.pop(_quiet.VERBOSE_ENV, None)
    environment.update(env)
    return subprocess.run(
        [sys.executable, "-m", "torch_nki", *args],
        capture_output=True,
        text=True,
        check=False,
        timeout=600,
        cwd=ROOT,
        env=environment,
    )


def test_output_written_to_the_descriptors_is_captured(
    capfd: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(_quiet.VERBOSE_ENV, "0")
    with _quiet.captured("a C library"):
        os.write(1, b"USDT: from C on stdout\n")
        os.write(2, b"ERROR: from C on stderr\n")
    os.write(2, b"after the block\n")
    out, err = capfd.readouterr()
    assert (out, err) == ("", "after the block\n")
    monkeypatch.setenv(_quiet.VERBOSE_ENV, "1")
    with _quiet.captured("a C library"):
        os.write(2, b"ERROR: from C on stderr\n")
    out, err = capfd.readouterr()
    assert (out, err) == ("", "[torch-nki] captured from a C library:\nERROR: from C on stderr\n")


def test_an_exception_in_the_block_restores_the_descriptors(
    capfd: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(_quiet.VERBOSE_ENV, "0")
    with pytest.raises(RuntimeError, match="inside"), _quiet.captured("a failing call"):
        os.write(2, b"noise\n")
        raise RuntimeError("inside")
    os.write(2, b"restored\n")
    assert capfd.readouterr().err == "restored\n"


def test_the_cli_leaves_verbose_mode_as_it_found_it(monkeypatch: pytest.MonkeyPatch) -> None:
    from torch_nki import cli

    monkeypatch.delenv(_quiet.VERBOSE_ENV, raising=False)
    assert cli.main(["-v", "list"]) == 0
    assert _quiet.VERBOSE_ENV not in os.environ


def _foreign(stderr: str) -> list[str]:
    """The stderr lines that are not torch-nki's own (its progress bars and notes)."""
    lines = stderr.replace("\r", "\n").splitlines()
    return [line for line in lines if line and not line.startswith("[torch-nki]")]


def test_the_swap_command_prints_only_its_own_output() -> None:
    pytest.importorskip("transformers")
    quiet = _cli("swap", "--model", "llama-tiny")
    assert quiet.returncode == 0, quiet.stderr
    assert _foreign(quiet.stderr) == []
    assert "[torch-nki] profiling [####################] 2/2" in quiet.stderr  # the progress bar stays
    assert "== llama-tiny (f32): profile" in quiet.stdout
    assert not [line for line in quiet.stdout.splitlines() if line.startswith(("USDT", "ERROR:", "WARNING:"))]
    loud = _cli("-v", "swap", "--model", "llama-tiny")
    assert loud.returncode == 0, loud.stderr
    # Verbose: whatever was captured is shown, each block under its header.
    blocks = loud.stderr.split("[torch-nki] captured from ")
    shown = [line for block in blocks[1:] for line in block.splitlines()[1:] if line]
    assert sorted(_foreign(loud.stderr)) == sorted(
        line for line in shown if not line.startswith("[torch-nki]")
    )
    assert all(block.startswith("torch.profiler:") for block in blocks[1:])


def test_fast_builds_and_prints_the_library_without_warnings() -> None:
    result = _cli("fast")
    assert result.returncode == 0, result.stderr
    assert result.stderr == ""
    assert Path(result.stdout.strip()).is_file()
    header = _cli("fast", "--header")
    assert header.returncode == 0 and header.stderr == ""
    assert "#define" in header.stdout or "struct" in header.stdout

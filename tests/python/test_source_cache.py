"""The persistent NKI source cache: entries are reused, corrupted or truncated entries are
reported once and rebuilt, concurrent writers all succeed, and ``torch-nki cache`` manages it."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import warnings
from collections.abc import Iterator
from pathlib import Path

import pytest
import torch

import torch_nki
from torch_nki import cli, source_cache


@pytest.fixture
def cache_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    monkeypatch.setenv("TORCH_NKI_CACHE_DIR", str(tmp_path / "cache"))
    yield tmp_path / "cache"


def _emit() -> str:
    return torch_nki.emit("add", torch.empty(300, 70, device="meta"), torch.empty(300, 70, device="meta"))


def _entries(d: Path) -> list[Path]:
    return sorted(d.glob("*.nkicache"))


def test_an_entry_is_written_once_and_reused(cache_dir: Path) -> None:
    assert source_cache.path() == cache_dir
    assert source_cache.info() == (0, 0)
    first = _emit()
    (entry,) = _entries(cache_dir)
    stamp = entry.stat().st_mtime_ns
    assert _emit() == first
    assert entry.stat().st_mtime_ns == stamp  # a hit does not rewrite
    header, body = entry.read_text().split("\n", 1)
    assert header.startswith("torch-nki-cache 2 ")
    body_json = json.loads(body)
    assert body_json["source"] == first
    # The entry records the key it was written for.
    assert body_json["key"]["digest"] == entry.stem
    assert body_json["key"]["op"] == "add" and body_json["key"]["target"] == "trn2"
    assert body_json["key"]["signature"] == "x: f32[300, 70], y: f32[300, 70] -> out0: f32[300, 70]"
    # A different signature is a different entry.
    torch_nki.emit("add", torch.empty(3, 7, device="meta"), torch.empty(3, 7, device="meta"))
    assert source_cache.info().entries == 2


@pytest.mark.parametrize("damage", ["truncate", "flip", "empty"])
def test_damaged_entries_are_reported_once_and_rebuilt(cache_dir: Path, damage: str) -> None:
    good = _emit()
    (entry,) = _entries(cache_dir)
    raw = entry.read_bytes()
    damaged = {
        "truncate": raw[: len(raw) // 2],
        "flip": raw[:-4] + bytes([raw[-4] ^ 0x01]) + raw[-3:],
        "empty": b"",
    }[damage]
    entry.write_bytes(damaged)
    with pytest.warns(RuntimeWarning, match="NKI source cache entry .*nkicache: .*; rebuilt it"):
        assert _emit() == good
    assert entry.read_bytes() == raw  # rebuilt to the same bytes
    # The same damage again is not reported a second time in this process.
    entry.write_bytes(damaged)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert _emit() == good


def _meta(*shape: int) -> torch.Tensor:
    return torch.empty(*shape, device="meta")


def test_entries_moved_swapped_or_copied_over_another_key_are_rebuilt_not_served(cache_dir: Path) -> None:
    add = torch_nki.emit("add", _meta(8, 4), _meta(8, 4))
    (add_entry,) = _entries(cache_dir)
    softmax = torch_nki.emit("softmax", _meta(8, 4))
    (softmax_entry,) = set(_entries(cache_dir)) - {add_entry}
    add_raw, softmax_raw = add_entry.read_bytes(), softmax_entry.read_bytes()
    # Swapped between two ops: each is reported, naming both keys, and rebuilt.
    add_entry.write_bytes(softmax_raw)
    softmax_entry.write_bytes(add_raw)
    with pytest.warns(RuntimeWarning, match=r"it was written for softmax\(x: f32\[8, 4\].*not for add\("):
        assert torch_nki.emit("add", _meta(8, 4), _meta(8, 4)) == add
    with pytest.warns(RuntimeWarning, match=r"it was written for add\(.*not for softmax\("):
        assert torch_nki.emit("softmax", _meta(8, 4)) == softmax
    assert (add_entry.read_bytes(), softmax_entry.read_bytes()) == (add_raw, softmax_raw)
    # The same op at other shapes: copied over that entry, or moved into its place.
    other = torch_nki.emit("add", _meta(16, 4), _meta(16, 4))
    (other_entry,) = set(_entries(cache_dir)) - {add_entry, softmax_entry}
    for place in ("copy", "move"):
        if place == "copy":
            other_entry.write_bytes(add_raw)
        else:
            add_entry.rename(other_entry)
        with pytest.warns(
            RuntimeWarning, match=r"written for add\(x: f32\[8, 4\].*not for add\(x: f32\[16, 4\]"
        ):
            assert torch_nki.emit("add", _meta(16, 4), _meta(16, 4)) == other
        torch_nki._emit._REPORTED.clear()  # the same status again is reported once per process
    assert torch_nki.emit("add", _meta(8, 4), _meta(8, 4)) == add  # a miss after the move: rebuilt
    assert add_entry.read_bytes() == add_raw


def test_concurrent_processes_writing_one_entry_all_succeed(
    cache_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # What the source is, from a cache of its own (nothing the children write can reach it).
    monkeypatch.setenv("TORCH_NKI_CACHE_DIR", str(tmp_path / "reference"))
    want = hashlib.sha256(_emit().encode()).hexdigest()
    monkeypatch.setenv("TORCH_NKI_CACHE_DIR", str(cache_dir))
    code = (
        "import hashlib, torch, torch_nki\n"
        "m = torch.empty(300, 70, device='meta')\n"
        "for _ in range(20):\n"
        "    s = torch_nki.emit('add', m, m)\n"
        "print(hashlib.sha256(s.encode()).hexdigest())\n"
    )
    env = {**os.environ, "TORCH_NKI_CACHE_DIR": str(cache_dir)}
    procs = [
        subprocess.Popen([sys.executable, "-c", code], env=env, stdout=subprocess.PIPE, text=True)
        for _ in range(3)
    ]
    outs = [p.communicate(timeout=300)[0] for p in procs]
    assert [p.returncode for p in procs] == [0, 0, 0]
    assert [o.strip() for o in outs] == [want] * 3
    assert len(_entries(cache_dir)) == 1
    assert not list(cache_dir.glob(".*.tmp"))
    # This process reads the entry the children raced to write: the same source.
    assert hashlib.sha256(_emit().encode()).hexdigest() == want


def test_an_unusable_cache_warns_once_and_still_emits(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    blocker = tmp_path / "not-a-directory"
    blocker.write_text("a file where the cache directory should be")
    monkeypatch.setenv("TORCH_NKI_CACHE_DIR", str(blocker / "cache"))
    with pytest.warns(RuntimeWarning, match="NKI source cache at .*not-a-directory.*; not caching"):
        source = _emit()
    assert source.startswith('"""`add` for trn2')
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert _emit() == source


def test_cli_cache_path_info_clear(cache_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _emit()
    assert cli.main(["cache", "path"]) == 0
    assert capsys.readouterr().out.strip() == str(cache_dir)
    assert cli.main(["cache", "info"]) == 0
    assert f"{cache_dir}: 1 entries, " in capsys.readouterr().out
    assert cli.main(["cache", "clear"]) == 0
    assert "removed 1 entries" in capsys.readouterr().out
    assert source_cache.info() == (0, 0)


def test_cli_cache_on_a_damaged_directory(
    cache_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    _emit()
    (entry,) = _entries(cache_dir)
    entry.unlink()
    (entry / "inside").mkdir(parents=True)  # a directory in an entry's place
    (cache_dir / f".{entry.stem}.1.0.tmp").write_text("an interrupted writer's file")
    assert cli.main(["cache", "info"]) == 0
    assert f"{cache_dir}: 0 entries, 0 bytes" in capsys.readouterr().out
    assert cli.main(["cache", "clear"]) == 0
    assert "removed 1 entries" in capsys.readouterr().out
    assert list(cache_dir.iterdir()) == []
    blocker = tmp_path / "a-file"
    blocker.write_text("a file where the cache directory should be")
    monkeypatch.setenv("TORCH_NKI_CACHE_DIR", str(blocker))
    for action in ("clear", "info"):
        assert cli.main(["cache", action]) == 2
        out = capsys.readouterr().out
        assert (
            out.startswith(f"torch-nki cache {action}: {blocker}: Not a directory") and out.count("\n") == 1
        )

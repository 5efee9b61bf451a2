"""``torch_nki.load`` checks a library file before mapping it: a truncated, damaged, foreign or
other-version library is a ``PluginError`` naming the file and what is wrong, never a signal.

The damaged libraries are copies of this package's own native module (a torch-nki kernel
module like any crate's), cut or patched; each load runs in a child process, so a regression
that maps one (and dies of ``SIGBUS``) fails the test instead of killing the run."""

from __future__ import annotations

import os
import struct
import subprocess
import sys
from pathlib import Path

import pytest

import torch_nki
from torch_nki import _library_check

NATIVE = Path(torch_nki._native.__file__ or "")


def _variants(tmp: Path) -> dict[str, Path]:
    """Damaged copies of the native module, by what is wrong with them."""
    data = NATIVE.read_bytes()
    _, _, _, _, phoff, _, _, _, phentsize, phnum = struct.unpack_from("<HHIQQQIHHH", data, 16)
    loads = []
    for i in range(phnum):
        p_type, _, off, _, _, filesz = struct.unpack_from("<IIQQQQ", data, phoff + i * phentsize)
        if p_type == 1:
            loads.append((off, filesz))
    code_off, code_size = max(loads, key=lambda seg: seg[1])  # the text segment is the largest
    marker = data.find(b"torch-nki-module ")
    assert marker > 0
    out: dict[str, bytes] = {
        "empty": b"",
        "header only": data[:64],
        "cut in the code": data[: code_off + code_size // 2],
        "cut before the section headers": data[:-100],
        "not ELF": b"#!/bin/sh\necho not a library\n" * 3,
        "other machine": data[:18] + struct.pack("<H", 183) + data[20:],  # aarch64
        "executable": data[:16] + struct.pack("<H", 2) + data[18:],
        "other version": data[:marker] + b"torch-nki-module 7 9.9.9\0" + data[marker + 25 :],
        "no marker": data.replace(b"TORCH_NKI_MODULE\0", b"TORCH_NKI_MODULX\0"),
        "no PyInit": data.replace(b"PyInit__native\0", b"PyInit__nativX\0"),
    }
    paths = {}
    for i, (what, content) in enumerate(out.items()):
        directory = tmp / f"v{i}"
        directory.mkdir()
        path = directory / "lib_native.so"
        path.write_bytes(content)
        paths[what] = path
    return paths


EXPECTED = {
    "empty": "is not a torch-nki kernel module: not an ELF shared library",
    "header only": "is truncated: its program header 0 at byte 64 ends past the end of the file (64 bytes)",
    "cut in the code": "is truncated: its loadable segment",
    "cut before the section headers": "is truncated: its section header",
    "not ELF": "not an ELF shared library (it starts with b'#!/bin/s')",
    "other machine": "is built for ELF machine/class/encoding (2, 1, 183)",
    "executable": "is an ELF file of type 2, not a shared library",
    "other version": "was built against nki-core 9.9.9 (module protocol 7), but this torch_nki uses",
    "no marker": "has no TORCH_NKI_MODULE marker",
    "no PyInit": "exports no PyInit__native",
}


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="ELF libraries")
def test_damaged_libraries_are_plugin_errors_naming_the_file_in_a_child_process(tmp_path: Path) -> None:
    variants = _variants(tmp_path)
    code = (
        "import sys, torch_nki\n"
        "for path in sys.argv[1:]:\n"
        "    try:\n"
        "        torch_nki.load(path, namespace='damaged')\n"
        "        print('LOADED', path)\n"
        "    except torch_nki.PluginError as e:\n"
        "        print('ERROR', e)\n"
    )
    paths = [str(p) for p in variants.values()]
    result = subprocess.run(
        [sys.executable, "-c", code, *paths],
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
        env={**os.environ, "TORCH_NKI_PLUGINS": ""},
    )
    assert result.returncode == 0, f"child died (status {result.returncode}): {result.stderr[-2000:]}"
    lines = result.stdout.splitlines()
    assert len(lines) == len(variants), result.stdout
    for (what, path), line in zip(variants.items(), lines, strict=True):
        assert line.startswith(f"ERROR torch_nki.load: {path} "), f"{what}: {line}"
        assert EXPECTED[what] in line, f"{what}: {line}"


def test_the_package_module_passes_the_check_and_carries_its_versions() -> None:
    checked = _library_check.check(NATIVE, "_native", NATIVE)
    assert checked.marker == tuple(torch_nki._native.versions())
    assert len(checked.digest) == 64


def test_an_unreadable_path_is_a_plugin_error(tmp_path: Path) -> None:
    with pytest.raises(torch_nki.PluginError, match=r"cannot read .*libx\.so"):
        _library_check.check(tmp_path / "libx.so", "x", NATIVE)

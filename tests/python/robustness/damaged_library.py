"""Damaged kernel libraries are refused before they are mapped: a PluginError naming the file,
never SIGBUS (copies of the package's own native module, cut or patched)."""

import struct
import sys
import tempfile
from pathlib import Path

import torch_nki

native = Path(torch_nki._native.__file__ or "").read_bytes()
phoff, phentsize, phnum = (struct.unpack_from("<HHIQQQIHHH", native, 16)[i] for i in (4, 8, 9))
loads = [struct.unpack_from("<IIQQQQ", native, phoff + i * phentsize) for i in range(phnum)]
code = max((seg for seg in loads if seg[0] == 1), key=lambda seg: seg[5])
cuts = {"header only": 64, "inside the code": code[2] + code[5] // 2, "tail": len(native) - 7}
with tempfile.TemporaryDirectory() as tmp:
    for what, size in cuts.items():
        path = Path(tmp) / what.replace(" ", "_") / "lib_native.so"
        path.parent.mkdir()
        path.write_bytes(native[:size])
        try:
            torch_nki.load(path, namespace="damaged")
        except torch_nki.PluginError as err:
            assert str(path) in str(err) and "truncated" in str(err), err
        else:
            sys.exit(f"{what}: loaded")
print("OK")

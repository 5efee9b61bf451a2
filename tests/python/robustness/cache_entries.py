"""Disk-cache entries are bound to their keys: truncated, corrupted, swapped and moved entries
are a warning and a rebuild, never served."""

import os
import tempfile
import warnings
from pathlib import Path

import torch

with tempfile.TemporaryDirectory() as tmp:
    os.environ["TORCH_NKI_CACHE_DIR"] = tmp
    import torch_nki

    def meta(*shape: int) -> torch.Tensor:
        return torch.empty(*shape, device="meta")

    add = torch_nki.emit("add", meta(8, 4), meta(8, 4))
    (add_entry,) = Path(tmp).glob("*.nkicache")
    softmax = torch_nki.emit("softmax", meta(8, 4))
    (softmax_entry,) = set(Path(tmp).glob("*.nkicache")) - {add_entry}
    raw_add, raw_softmax = add_entry.read_bytes(), softmax_entry.read_bytes()
    damages = {
        "swapped": raw_softmax,
        "truncated": raw_add[: len(raw_add) // 2],
        "corrupted": raw_add[:-3] + bytes([raw_add[-3] ^ 1]) + raw_add[-2:],
        "empty": b"",
    }
    for what, content in damages.items():
        add_entry.write_bytes(content)
        torch_nki._emit._REPORTED.clear()
        with warnings.catch_warnings(record=True) as seen:
            warnings.simplefilter("always")
            got = torch_nki.emit("add", meta(8, 4), meta(8, 4))
        assert got == add, f"{what}: served another source"
        assert any("rebuilt it" in str(w.message) for w in seen), f"{what}: no warning"
        assert add_entry.read_bytes() == raw_add, f"{what}: not rebuilt"
    add_entry.rename(softmax_entry)  # moved over another op's entry
    torch_nki._emit._REPORTED.clear()
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        assert torch_nki.emit("softmax", meta(8, 4)) == softmax
    assert any("written for add(" in str(w.message) for w in seen)
print("OK")

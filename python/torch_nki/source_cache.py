"""The persistent cache of generated NKI source, shared by every process on the machine.

Entries are keyed by a content hash of the traced program (its instructions, shapes, dtypes,
source lines and target) and hold the generated source; on a Trainium host they are where
``nki.jit`` artifacts belong too. The directory is ``$TORCH_NKI_CACHE_DIR``, else
``$XDG_CACHE_HOME/torch-nki``, else ``~/.cache/torch-nki``. Writes are atomic; a truncated or
corrupted entry is detected by its checksum, reported once as a warning and rebuilt.
``torch-nki cache info|clear|path`` is the command-line view.
"""

from __future__ import annotations

from pathlib import Path
from typing import NamedTuple

import torch_nki

__all__ = ["CacheInfo", "clear", "info", "path"]


class CacheInfo(NamedTuple):
    """How much the cache holds."""

    entries: int
    bytes: int


def path() -> Path:
    """The cache directory (it may not exist yet)."""
    return Path(torch_nki._native.disk_cache_dir())


def info() -> CacheInfo:
    """Number of entries and their total size."""
    entries, size = torch_nki._native.disk_cache_info()
    return CacheInfo(entries, size)


def clear() -> int:
    """Removes every entry; returns how many there were."""
    return torch_nki._native.disk_cache_clear()

"""Checks a kernel library file before it is mapped into the process.

``dlopen`` maps a shared library's segments as the file's headers describe them; a file cut
short (a truncated copy, an interrupted build) maps pages past its end, and the first access to
them kills the process with ``SIGBUS``. :func:`check` reads the file instead and refuses it
with a :class:`~torch_nki.errors.PluginError` naming the file and what is wrong: not an ELF
shared object, built for another machine, headers, segments or sections past the end of the
file, no ``PyInit_<name>``, no torch-nki module marker (``nki_module!`` exports one, see
``nki-python``'s ``marker.rs``), or a marker of another module protocol or nki-core version.
Libraries in another format (Mach-O, PE) are left to the platform's loader.
"""

from __future__ import annotations

import hashlib
import struct
from dataclasses import dataclass
from pathlib import Path
from typing import NoReturn

from torch_nki.errors import PluginError

__all__ = ["MARKER_LEN", "MARKER_SYMBOL", "Library", "check"]

MARKER_SYMBOL = "TORCH_NKI_MODULE"
"""The symbol ``nki_module!`` exports: ``torch-nki-module <protocol> <nki-core version>``."""
MARKER_LEN = 64
"""Its size in bytes (NUL-padded)."""

_ELF_MAGIC = b"\x7fELF"
_ET_DYN = 3
_PT_LOAD = 1
_SHT_NOBITS = 8
_SHT_DYNSYM = 11
_OTHER_FORMATS = (b"\xcf\xfa\xed\xfe", b"\xce\xfa\xed\xfe", b"\xca\xfe\xba\xbe", b"MZ")


@dataclass(frozen=True)
class Library:
    """A library that passed :func:`check`."""

    path: Path
    digest: str
    """SHA-256 of the file's bytes (two paths with the same digest are the same library)."""
    marker: tuple[int, str] | None
    """``(protocol, nki-core version)`` from the marker; ``None`` for a non-ELF library."""


class _Elf:
    """Bounds-checked reads of an ELF image."""

    def __init__(self, path: Path, data: bytes) -> None:
        self.path, self.data = path, data
        if len(data) < 64:
            self.fail(f"is {len(data)} bytes long, shorter than an ELF header")
        if data[4] not in (1, 2) or data[5] not in (1, 2):
            self.fail(f"has an invalid ELF class/encoding ({data[4]}, {data[5]})")
        self.wide = data[4] == 2
        self.end = "<" if data[5] == 1 else ">"

    def fail(self, what: str) -> NoReturn:
        raise PluginError(f"torch_nki.load: {self.path} {what}; it is not a loadable kernel library")

    def unpack(self, fmt: str, offset: int, what: str) -> tuple[int, ...]:
        size = struct.calcsize(self.end + fmt)
        if offset < 0 or offset + size > len(self.data):
            end = len(self.data)
            self.fail(
                f"is truncated: its {what} at byte {offset} ends past the end of the file ({end} bytes)"
            )
        return struct.unpack_from(self.end + fmt, self.data, offset)

    def header(self) -> tuple[int, ...]:
        """``(type, phoff, shoff, phentsize, phnum, shentsize, shnum)``."""
        fmt = "HHIQQQIHHHHHH" if self.wide else "HHIIIIIHHHHHH"
        kind, _, _, _, phoff, shoff, _, _, phes, phn, shes, shn, _ = self.unpack(fmt, 16, "header")
        return kind, phoff, shoff, phes, phn, shes, shn

    def segments(self, phoff: int, phentsize: int, phnum: int) -> list[tuple[int, int, int, int]]:
        """``(type, offset, vaddr, filesz)`` of every program header."""
        out = []
        for i in range(phnum):
            at = phoff + i * phentsize
            if self.wide:
                p_type, _, off, vaddr, _, filesz, _, _ = self.unpack("IIQQQQQQ", at, f"program header {i}")
            else:
                p_type, off, vaddr, _, filesz, _, _, _ = self.unpack("IIIIIIII", at, f"program header {i}")
            out.append((p_type, off, vaddr, filesz))
        return out

    def sections(self, shoff: int, shentsize: int, shnum: int) -> list[tuple[int, int, int, int, int]]:
        """``(type, offset, size, link, entsize)`` of every section header."""
        out = []
        for i in range(shnum if shoff else 0):
            at = shoff + i * shentsize
            if self.wide:
                _, t, _, _, off, size, link, _, _, ent = self.unpack("IIQQQQIIQQ", at, f"section header {i}")
            else:
                _, t, _, _, off, size, link, _, _, ent = self.unpack("IIIIIIIIII", at, f"section header {i}")
            out.append((t, off, size, link, ent))
        return out

    def string(self, table: tuple[int, int, int, int, int], index: int) -> str:
        _, off, size, _, _ = table
        if index >= size:
            self.fail(f"has a symbol name at {index} outside its string table")
        start = off + index
        stop = self.data.find(b"\0", start, off + size)
        return self.data[start : stop if stop >= 0 else off + size].decode("utf-8", "replace")

    def symbols(self, sections: list[tuple[int, int, int, int, int]]) -> dict[str, int]:
        """The dynamic symbols' names and values."""
        out: dict[str, int] = {}
        for t, off, size, link, ent in sections:
            if t != _SHT_DYNSYM or ent == 0:
                continue
            if link >= len(sections):
                self.fail("has a dynamic symbol table whose string table does not exist")
            strtab = sections[link]
            for i in range(size // ent):
                if self.wide:
                    name, _, _, _, value, _ = self.unpack("IBBHQQ", off + i * ent, f"dynamic symbol {i}")
                else:
                    name, value, _, _, _, _ = self.unpack("IIIBBH", off + i * ent, f"dynamic symbol {i}")
                out[self.string(strtab, name)] = value
        return out


def _machine(data: bytes) -> tuple[int, int, int] | None:
    """``(class, encoding, machine)`` of an ELF image, or ``None``."""
    if len(data) < 20 or not data.startswith(_ELF_MAGIC):
        return None
    return data[4], data[5], struct.unpack_from("<H" if data[5] == 1 else ">H", data, 18)[0]


def _read(path: Path) -> bytes:
    try:
        return path.read_bytes()
    except OSError as err:
        raise PluginError(f"torch_nki.load: cannot read {path}: {err.strerror or err}") from err


def check(path: Path, module: str, host: Path) -> Library:
    """Reads the library at ``path`` and checks that it can be mapped and is the torch-nki kernel
    module ``module`` for the same machine as ``host`` (this package's own native module)."""
    data = _read(path)
    digest = hashlib.sha256(data).hexdigest()
    if not data.startswith(_ELF_MAGIC):
        if data.startswith(_OTHER_FORMATS):
            return Library(path, digest, None)
        raise PluginError(
            f"torch_nki.load: {path} is not a torch-nki kernel module: not an ELF shared library "
            f"(it starts with {data[:8]!r})"
        )
    elf = _Elf(path, data)
    kind, phoff, shoff, phentsize, phnum, shentsize, shnum = elf.header()
    if kind != _ET_DYN:
        elf.fail(f"is an ELF file of type {kind}, not a shared library")
    try:
        with host.open("rb") as f:
            ours = _machine(f.read(64))
    except OSError:
        ours = None
    theirs = _machine(data)
    if ours is not None and theirs != ours:
        elf.fail(f"is built for ELF machine/class/encoding {theirs}, this process is {ours}")
    segments = elf.segments(phoff, phentsize, phnum)
    for i, (p_type, off, _, filesz) in enumerate(segments):
        if p_type == _PT_LOAD and off + filesz > len(data):
            elf.fail(
                f"is truncated: its loadable segment {i} spans bytes {off}..{off + filesz}, but the "
                f"file has {len(data)} bytes"
            )
    sections = elf.sections(shoff, shentsize, shnum)
    for i, (t, off, size, _, _) in enumerate(sections):
        if t != _SHT_NOBITS and off + size > len(data):
            elf.fail(
                f"is truncated: its section {i} spans bytes {off}..{off + size}, but the file has "
                f"{len(data)} bytes"
            )
    symbols = elf.symbols(sections)
    if f"PyInit_{module}" not in symbols:
        raise PluginError(
            f"torch_nki.load: {path} is not a torch-nki kernel module: it exports no PyInit_{module}; the "
            f"crate must declare `nki_python::nki_module!({module});` with its [lib] name `{module}`"
        )
    if MARKER_SYMBOL not in symbols:
        raise PluginError(
            f"torch_nki.load: {path} is not a torch-nki kernel module of this version: it has no "
            f"{MARKER_SYMBOL} marker (declared by `nki_python::nki_module!`); rebuild the crate against "
            "this torch-nki"
        )
    return Library(path, digest, _marker(elf, segments, symbols[MARKER_SYMBOL]))


def _marker(elf: _Elf, segments: list[tuple[int, int, int, int]], vaddr: int) -> tuple[int, str]:
    for p_type, off, start, filesz in segments:
        if p_type == _PT_LOAD and start <= vaddr and vaddr + MARKER_LEN <= start + filesz:
            raw = elf.data[off + vaddr - start : off + vaddr - start + MARKER_LEN]
            words = raw.rstrip(b"\0").decode("ascii", "replace").split(" ")
            if len(words) == 3 and words[0] == "torch-nki-module" and words[1].isdigit():
                return int(words[1]), words[2]
            elf.fail(f"has a malformed {MARKER_SYMBOL} marker {raw.rstrip(bytes(1))!r}")
    elf.fail(f"has its {MARKER_SYMBOL} marker outside its loadable segments")

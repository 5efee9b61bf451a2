"""Ties a torch-nki wheel to the torch of the interpreter that runs this script.

``python scripts/tie_wheel.py BASE.whl OUT_DIR`` (``scripts/build_wheel.sh`` runs it) compiles the
fast C++ kernels (``torch_nki/csrc/fast_ops.cpp``) against the installed torch, with the ABI
header of BASE's own native module, and writes OUT_DIR/torch_nki-<version>+torch<X.Y>-<tags>.whl:
BASE plus that library (``torch_nki/_fast_ops-torch<X.Y>-<hash>.so``, which ``torch_nki._fast``
loads without a compiler), with its torch requirement replaced by ``torch==X.Y.*`` and the
local version label ``+torch<X.Y>``, as C++ extension packages tie their wheels to one torch.
Prints the written wheel's path.
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import os
import re
import sys
import tempfile
import zipfile
from pathlib import Path

TORCH_REQUIREMENT = re.compile(r"Requires-Dist: torch\s*(?:[<>=!~].*)?")
"""The unconditional torch requirement of the wheel's METADATA (no extra, no marker)."""


def _record_line(root: Path, path: Path) -> str:
    data = path.read_bytes()
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"{path.relative_to(root).as_posix()},sha256={digest},{len(data)}"


def retag_metadata(text: str, local: str, pin: str) -> str:
    """METADATA with the version's local label ``+local`` and the torch requirement ``pin``."""
    lines = text.split("\n")
    versions = [i for i, line in enumerate(lines) if line.startswith("Version: ")]
    torches = [i for i, line in enumerate(lines) if TORCH_REQUIREMENT.fullmatch(line)]
    if len(versions) != 1:
        raise ValueError(f"METADATA has {len(versions)} 'Version:' lines, expected 1")
    if len(torches) != 1:
        raise ValueError(f"METADATA has {len(torches)} unconditional torch requirements, expected 1")
    version = lines[versions[0]].removeprefix("Version: ")
    if "+" in version:
        raise ValueError(f"the wheel's version {version} already has a local label")
    lines[versions[0]] = f"Version: {version}+{local}"
    lines[torches[0]] = f"Requires-Dist: {pin}"
    return "\n".join(lines)


def tie(base: Path, out_dir: Path) -> Path:
    """Writes the wheel tied to the installed torch into ``out_dir`` and returns its path."""
    if not base.is_file() or base.suffix != ".whl":
        raise ValueError(f"{base} is not a wheel file")
    parts = base.name[: -len(".whl")].split("-")
    if len(parts) != 5:
        raise ValueError(f"{base.name}: expected NAME-VERSION-PYTHON-ABI-PLATFORM.whl")
    name, version = parts[0], parts[1]
    with tempfile.TemporaryDirectory(prefix="torch-nki-wheel-") as tmp:
        root = Path(tmp)
        with zipfile.ZipFile(base) as zf:
            stray = [n for n in zf.namelist() if Path(n).name.startswith("_fast_ops")]
            if stray:
                raise ValueError(f"{base.name} already holds fast C++ libraries: {', '.join(stray)}")
            zf.extractall(root)
        # Import this wheel's own package (its native module and _fast), not an installed one,
        # and neither load nor build a fast library while doing so.
        os.environ["TORCH_NKI_FAST"] = "0"
        os.environ["TORCH_DEVICE_BACKEND_AUTOLOAD"] = "0"
        sys.path.insert(0, str(root))
        from torch_nki import _fast

        if Path(_fast.__file__).resolve().parent != (root / "torch_nki").resolve():
            raise RuntimeError(f"imported {_fast.__file__}, not the wheel's torch_nki")
        library = _fast.build_prebuilt(root / "torch_nki")
        minor = _fast.torch_minor()
        local = f"torch{minor}"
        info = root / f"{name}-{version}.dist-info"
        if not info.is_dir():
            raise ValueError(f"{base.name} has no {info.name}")
        metadata = info / "METADATA"
        metadata.write_text(retag_metadata(metadata.read_text(), local, f"torch=={minor}.*"))
        new_info = root / f"{name}-{version}+{local}.dist-info"
        info.rename(new_info)
        record = new_info / "RECORD"
        files = sorted(p for p in root.rglob("*") if p.is_file() and p != record)
        # The .dist-info goes last, RECORD last of all, as wheel builders write them.
        files.sort(key=lambda p: p.is_relative_to(new_info))
        lines = [_record_line(root, p) for p in files]
        record.write_text("\n".join([*lines, f"{record.relative_to(root).as_posix()},,"]) + "\n")
        out_dir.mkdir(parents=True, exist_ok=True)
        wheel = out_dir / "-".join([name, f"{version}+{local}", *parts[2:]])
        wheel = wheel.with_name(wheel.name + ".whl")
        with zipfile.ZipFile(wheel, "w", zipfile.ZIP_DEFLATED) as zf:
            for path in [*files, record]:
                zf.write(path, path.relative_to(root).as_posix())
        size = library.stat().st_size // 1024
        print(f"{library.name}: fast C++ kernels for torch {minor} ({size} KiB)", file=sys.stderr)
    return wheel


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("base", type=Path, help="the wheel maturin built (torch_nki-VERSION-...whl)")
    parser.add_argument("out_dir", type=Path, help="where to write the torch-tied wheel")
    args = parser.parse_args(argv)
    try:
        wheel = tie(args.base, args.out_dir)
    except (ValueError, RuntimeError, OSError) as err:
        print(f"tie_wheel.py: {err}", file=sys.stderr)
        return 1
    print(wheel)
    return 0


if __name__ == "__main__":
    sys.exit(main())

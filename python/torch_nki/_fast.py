"""The fast path: C++ dispatcher kernels (``csrc/fast_ops.cpp``) that run the common case of an
op call without Python, calling the native module's Rust kernels through its C ABI.

The library is compiled against the installed torch (``python -m torch_nki._fast`` at install;
``scripts/setup.sh`` does it), or on the first import that finds none (about 10 s, once per
torch version; needs a C++20 compiler, ``$CXX`` or ``c++``). Without it — no compiler, or
``TORCH_NKI_FAST=0`` — the ops run the same Python kernels, only slower per call; the reason is
reported once as a ``RuntimeWarning``. See docs/design-notes.md for the measurements behind it.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import warnings
from pathlib import Path
from typing import Any

import torch

SOURCE = Path(__file__).resolve().parent / "csrc" / "fast_ops.cpp"
ABI_VERSION = 1
DISABLE_ENV = "TORCH_NKI_FAST"

_lock = threading.Lock()
_state: dict[str, Any] = {"loaded": None, "reason": None}


def _flags() -> list[str]:
    from torch.utils import cpp_extension

    abi = int(bool(torch._C._GLIBCXX_USE_CXX11_ABI))
    flags = ["-O2", "-std=c++20", "-fPIC", "-shared", f"-D_GLIBCXX_USE_CXX11_ABI={abi}"]
    flags += [f"-I{p}" for p in cpp_extension.include_paths()]
    for lib_dir in cpp_extension.library_paths():
        flags += [f"-L{lib_dir}", f"-Wl,-rpath,{lib_dir}"]
    return [*flags, "-lc10", "-ltorch_cpu"]


def _name() -> str:
    digest = hashlib.blake2b(digest_size=8)
    digest.update(SOURCE.read_bytes())
    digest.update(torch.__version__.encode())
    digest.update(" ".join(_flags()).encode())
    return f"_fast_ops-{digest.hexdigest()}.so"


def _candidates() -> list[Path]:
    cache = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return [SOURCE.parent.parent, Path(cache) / "torch-nki-fast"]


def library_path() -> Path | None:
    """The compiled library for this torch and source, if it exists."""
    name = _name()
    for d in _candidates():
        if (d / name).is_file():
            return d / name
    return None


def build(verbose: bool = False) -> Path:
    """Compiles the library for the installed torch (into the package directory when it is
    writable, else the user cache) and returns its path."""
    compiler = os.environ.get("CXX") or shutil.which("c++") or shutil.which("g++")
    if compiler is None:
        raise RuntimeError("no C++ compiler found (set $CXX)")
    name = _name()
    errors = []
    for d in _candidates():
        try:
            d.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(prefix=".fast_ops-", suffix=".so", dir=d)
            os.close(fd)
        except OSError as err:
            errors.append(f"{d}: {err}")
            continue
        cmd = [compiler, str(SOURCE), "-o", tmp, *_flags()]
        if verbose:
            print(" ".join(cmd), file=sys.stderr)
        proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
        if proc.returncode != 0:
            os.unlink(tmp)
            tail = "\n".join(proc.stderr.strip().splitlines()[-20:])
            raise RuntimeError(f"compiling {SOURCE.name} failed:\n{tail}")
        os.replace(tmp, d / name)  # atomic: concurrent builders all succeed
        return d / name
    raise RuntimeError("no writable directory for the fast library: " + "; ".join(errors))


def load() -> bool:
    """Loads the fast kernels' library (building it if needed) once; whether it is available.
    The reason it is not is reported once as a ``RuntimeWarning``."""
    with _lock:
        if _state["loaded"] is not None:
            return bool(_state["loaded"])
        reason = None
        if os.environ.get(DISABLE_ENV, "1") == "0":
            reason = f"${DISABLE_ENV}=0"
        else:
            try:
                path = library_path() or build()
                torch.ops.load_library(str(path))
                version = int(torch.ops.torch_nki_fast.abi_version())
                if version != ABI_VERSION:
                    reason = f"{path} has fast ABI {version}, this package {ABI_VERSION}"
            except Exception as err:
                reason = str(err)
        _state["loaded"] = reason is None
        _state["reason"] = reason
        if reason is not None and reason != f"${DISABLE_ENV}=0":
            warnings.warn(
                f"torch_nki: the fast C++ kernels are unavailable ({reason}); ops run their Python "
                "kernels (correct, but more overhead per call)",
                RuntimeWarning,
                stacklevel=2,
            )
        return reason is None


def enabled() -> bool:
    """Whether ops get the fast C++ kernels."""
    return bool(_state["loaded"])


def register(qualname: str, native: Any, kernel: str, slow: str, grad: str) -> None:
    """Registers the fast CPU and AutogradCPU kernels of ``qualname`` (kernel ``kernel`` of
    ``native``), with its hidden slow (Python CPU) and grad (Python autograd) twins."""
    torch.ops.torch_nki_fast.register_op(qualname, int(native._fast_api()), kernel, slow, grad)


def unregister(qualname: str) -> None:
    """Removes the fast kernels of ``qualname``."""
    torch.ops.torch_nki_fast.unregister_op(qualname)


if __name__ == "__main__":
    # Importing the package already built (or found) it; print where it is.
    print(library_path() or build(verbose=True))

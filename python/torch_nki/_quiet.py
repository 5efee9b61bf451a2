"""Keeping other libraries' noise out of torch-nki's output.

``torch.profiler`` starts and stops Kineto, whose C++ side writes straight to the process's
standard streams (``USDT: ... profiler_start``, ``ERROR: ... gpuGetDeviceCount failed with code
35`` on a machine without a GPU): Python's ``sys.stdout``/``sys.stderr`` never see it, so
:func:`captured` redirects the file descriptors 1 and 2 themselves around such calls. What was
captured is dropped, or, in verbose mode (``torch-nki -v``, or ``TORCH_NKI_VERBOSE=1``), written
to stderr after the block, marked as captured.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import sys
import tempfile
from collections.abc import Iterator

VERBOSE_ENV = "TORCH_NKI_VERBOSE"
"""Set to ``1`` to see what :func:`captured` captures (``torch-nki -v`` sets it)."""


def verbose() -> bool:
    """Whether captured output is shown (``$TORCH_NKI_VERBOSE`` is set and not ``0``)."""
    return os.environ.get(VERBOSE_ENV, "0") not in ("", "0")


def set_verbose(on: bool) -> None:
    """Turns verbose mode on or off for this process and the processes it starts."""
    os.environ[VERBOSE_ENV] = "1" if on else "0"


def _flush_c_stdio() -> None:
    """Flushes C's stdio buffers (what C code printed with ``printf`` and not yet written)."""
    with contextlib.suppress(OSError, AttributeError):  # no C library to ask (not POSIX)
        ctypes.CDLL(None).fflush(None)


@contextlib.contextmanager
def captured(what: str) -> Iterator[None]:
    """Captures everything written to file descriptors 1 and 2 inside the block (by C/C++ code,
    and by Python's ``sys.stdout``/``sys.stderr`` where they write to those descriptors);
    afterwards drops it, or in :func:`verbose` mode writes it to stderr
    under a ``[torch-nki] captured from <what>:`` line. Where the descriptors cannot be
    redirected (closed, or no temporary file), the block runs uncaptured."""
    sys.stdout.flush()
    sys.stderr.flush()
    try:
        sink = tempfile.TemporaryFile()  # noqa: SIM115  (closed below, after the descriptors)
        saved = (os.dup(1), os.dup(2))
    except OSError:
        yield
        return
    try:
        os.dup2(sink.fileno(), 1)
        os.dup2(sink.fileno(), 2)
        yield
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        _flush_c_stdio()
        os.dup2(saved[0], 1)
        os.dup2(saved[1], 2)
        for fd in saved:
            os.close(fd)
        sink.seek(0)
        text = sink.read().decode("utf-8", errors="replace")
        sink.close()
        if text and verbose():
            sys.stderr.write(f"[torch-nki] captured from {what}:\n{text}")
            if not text.endswith("\n"):
                sys.stderr.write("\n")
            sys.stderr.flush()

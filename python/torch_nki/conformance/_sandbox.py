"""The process state a corpus file runs in, set up and put back around each run: ``sys.path``,
``sys.argv``, the working directory, ``os.environ``, the folder's modules, a CPU stand-in for
``torch_xla``, recorded comparison functions and captured output."""

from __future__ import annotations

import contextlib
import importlib.util
import io
import os
import sys
import threading
import types
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any


def package_module(path: Path) -> tuple[str | None, Path]:
    """The dotted name ``path`` has as a module of the packages around it (the folders with an
    ``__init__.py``, so its relative imports resolve), and the folder that holds the outermost
    package (what goes on ``sys.path``); ``(None, path.parent)`` outside a package."""
    parts = [path.stem]
    folder = path.parent
    while (folder / "__init__.py").is_file() and folder.parent != folder:
        parts.append(folder.name)
        folder = folder.parent
    if len(parts) == 1:
        return None, path.parent
    return ".".join(reversed(parts)), folder


@contextlib.contextmanager
def file_context(path: Path) -> Iterator[None]:
    """While ``path`` runs: its folder first on ``sys.path`` (after it, the folder holding its
    outermost package, when it is in one), the working directory set to its folder,
    ``sys.argv == [path]`` (drivers that parse arguments get their defaults), and
    ``os.environ`` restored afterwards (kernel files set ``NEURON_*`` variables)."""
    saved_path, saved_argv, saved_cwd = list(sys.path), list(sys.argv), os.getcwd()
    saved_env = dict(os.environ)
    _, top = package_module(path)
    if top != path.parent:
        sys.path.insert(0, str(top))
    sys.path.insert(0, str(path.parent))
    sys.argv = [str(path)]
    os.chdir(path.parent)
    try:
        yield
    finally:
        sys.path[:] = saved_path
        sys.argv = saved_argv
        os.chdir(saved_cwd)
        if dict(os.environ) != saved_env:
            os.environ.clear()
            os.environ.update(saved_env)


def _inside(module: types.ModuleType, folder: Path) -> bool:
    file = getattr(module, "__file__", None)
    if not isinstance(file, str):
        return False
    try:
        return Path(file).resolve().is_relative_to(folder)
    except OSError:
        return False


@contextlib.contextmanager
def folder_modules(folder: Path) -> Iterator[None]:
    """The files of one folder share the modules they import from it (a driver imports the
    kernel file loaded before it); afterwards every module loaded from the folder is dropped, so
    the next folder's ``matrix_multiplication_nki_kernels`` is its own."""
    before = set(sys.modules)
    folder = folder.resolve()
    try:
        yield
    finally:
        for name in set(sys.modules) - before:
            module = sys.modules.get(name)
            if module is not None and _inside(module, folder):
                del sys.modules[name]


TORCH_XLA_SHIM = ("torch_xla", "torch_xla.core", "torch_xla.core.xla_model")
"""The modules :func:`torch_xla_shim` provides."""


def _cpu(*args: Any, **kwargs: Any) -> Any:
    import torch

    return torch.device("cpu")


def _no_op(*args: Any, **kwargs: Any) -> None:
    return None


@contextlib.contextmanager
def torch_xla_shim() -> Iterator[bool]:
    """Where ``torch_xla`` is not importable, provides a CPU stand-in for the block:
    ``torch_xla.device()`` and ``torch_xla.core.xla_model.xla_device()`` are
    ``torch.device("cpu")``, ``torch_xla.sync()`` and ``xla_model.mark_step()`` do nothing. The
    frontend runs kernels on the CPU simulator, so tensors stay CPU tensors. Yields whether the
    stand-in is in place (``False`` when the real ``torch_xla`` is installed)."""
    try:
        real = importlib.util.find_spec("torch_xla") is not None
    except (ImportError, ValueError):
        real = False
    if real:
        yield False
        return
    xla = types.ModuleType("torch_xla", "torch-nki conformance: CPU stand-in for torch_xla")
    core = types.ModuleType("torch_xla.core")
    xm = types.ModuleType("torch_xla.core.xla_model")
    xla.device = _cpu  # type: ignore[attr-defined]
    xla.sync = _no_op  # type: ignore[attr-defined]
    xm.xla_device = _cpu  # type: ignore[attr-defined]
    xm.mark_step = _no_op  # type: ignore[attr-defined]
    xla.core = core  # type: ignore[attr-defined]
    core.xla_model = xm  # type: ignore[attr-defined]
    saved = {name: sys.modules.get(name) for name in TORCH_XLA_SHIM}
    sys.modules.update(zip(TORCH_XLA_SHIM, (xla, core, xm), strict=True))
    try:
        yield True
    finally:
        for name, previous in saved.items():
            if previous is None:
                sys.modules.pop(name, None)
            else:
                sys.modules[name] = previous


COMPARISONS = (
    ("numpy", "allclose"),
    ("numpy", "array_equal"),
    ("numpy.testing", "assert_allclose"),
    ("numpy.testing", "assert_array_equal"),
    ("numpy.testing", "assert_equal"),
    ("torch", "allclose"),
    ("torch", "equal"),
    ("torch.testing", "assert_close"),
)
"""The comparison functions :func:`recorded_comparisons` wraps, as ``(module, name)``."""

ComparisonCallback = Callable[[str, bool], None]
"""Receives ``(function, passed)`` for each comparison made, e.g. ``("numpy.allclose", True)``."""

_DEPTH = threading.local()


def _wrap(qualname: str, fn: Callable[..., Any], on_compare: ComparisonCallback) -> Callable[..., Any]:
    asserts = qualname.rpartition(".")[2].startswith("assert")

    def compare(*args: Any, **kwargs: Any) -> Any:
        depth = getattr(_DEPTH, "value", 0)
        if depth:  # a comparison made by another one (assert_* helpers call each other)
            return fn(*args, **kwargs)
        _DEPTH.value = 1
        try:
            result = fn(*args, **kwargs)
        except Exception:
            on_compare(qualname, False)
            raise
        finally:
            _DEPTH.value = 0
        on_compare(qualname, True if asserts else bool(result))
        return result

    compare.__name__ = fn.__name__
    compare.__doc__ = fn.__doc__
    compare.__wrapped__ = fn  # type: ignore[attr-defined]
    return compare


@contextlib.contextmanager
def recorded_comparisons(on_compare: ComparisonCallback) -> Iterator[None]:
    """Within the block, every function of :data:`COMPARISONS` reports its outcome to
    ``on_compare`` (a ``False``/failed-assert/raised comparison as not passed) and then
    behaves as before; the originals are put back afterwards. A comparison made from inside
    another is not reported again."""
    import numpy
    import numpy.testing
    import torch
    import torch.testing

    modules = {"numpy": numpy, "numpy.testing": numpy.testing, "torch": torch, "torch.testing": torch.testing}
    saved = [(modules[m], name, getattr(modules[m], name)) for m, name in COMPARISONS]
    for module, name, fn in saved:
        setattr(module, name, _wrap(f"{module.__name__}.{name}", fn, on_compare))
    try:
        yield
    finally:
        for module, name, fn in saved:
            setattr(module, name, fn)


@contextlib.contextmanager
def captured_output() -> Iterator[io.StringIO]:
    """``sys.stdout`` and ``sys.stderr`` go into the yielded buffer for the block (drivers print
    whole arrays)."""
    buffer = io.StringIO()
    with contextlib.redirect_stdout(buffer), contextlib.redirect_stderr(buffer):
        yield buffer

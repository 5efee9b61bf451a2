"""The module tree of AWS's NKI CPU simulator package (``nki_cpu_simulator``), served by this
frontend: the interface nki-library's test framework drives in ``--test-mode simulation``.

That framework imports ``nki_cpu_simulator.nki`` and its submodules (``builtin``,
``compiler``, ``isa``, ``isa.constants``, ``language``, ``language.dtypes``, ``tensor``,
``typing``), aliases them as ``nki``, ``nki.language``, ... and runs a kernel with
``nki.cpu_simulate(kernel)[lnc](**inputs)``. :func:`install` registers that tree under a
package name; the modules are this frontend's (``torch_nki.nki``, its ``language``, ``isa``,
``typing``, ``collectives``), plus :func:`cpu_simulate` and the few names only the simulator
package has."""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import sys
import types
from typing import Any

from torch_nki import nki as frontend
from torch_nki.nki import collectives, isa, language, typing
from torch_nki.nki._values import HbmTensor
from torch_nki.nkilib_suite import _trace_only


class _Launcher:
    """``cpu_simulate(kernel)``: subscripted with the LNC degree (``[1]`` or ``[2]``), then
    called with the kernel's arguments by keyword (or position)."""

    def __init__(self, kernel: Any, lnc: int | None = None) -> None:
        self.kernel = kernel if isinstance(kernel, frontend.Kernel) else frontend.Kernel(kernel)
        self.lnc = lnc

    def __getitem__(self, lnc: Any) -> _Launcher:
        if not isinstance(lnc, int) or isinstance(lnc, bool) or lnc not in (1, 2):
            raise ValueError(f"cpu_simulate({self.kernel.__name__})[{lnc!r}]: the LNC degree is 1 or 2")
        return _Launcher(self.kernel, lnc)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        kernel: Any = self.kernel
        if self.lnc not in (None, 1):
            if not hasattr(kernel, "__getitem__"):
                raise NotImplementedError(
                    f"cpu_simulate({kernel.__name__})[{self.lnc}]: launching on {self.lnc} cores needs "
                    "SPMD launch grids, which this torch_nki does not have yet"
                )
            kernel = kernel[self.lnc]
        return kernel(*args, **kwargs)

    def __repr__(self) -> str:
        return f"cpu_simulate({self.kernel.__name__})" + (f"[{self.lnc}]" if self.lnc else "")


def cpu_simulate(kernel: Any) -> _Launcher:
    """``nki.cpu_simulate(kernel)[lnc](**inputs)``: runs ``kernel`` on this simulator with
    NumPy inputs and returns its outputs as NumPy arrays (what AWS's simulator package
    does)."""
    return _Launcher(kernel)


def _module(name: str, doc: str, **attributes: Any) -> types.ModuleType:
    module = types.ModuleType(name, doc)
    module.__dict__.update(attributes)
    return module


def _unavailable(module: str) -> Any:
    """A module ``__getattr__`` for a module of the simulator package whose contents this
    frontend does not have: every name is a ``NotImplementedError`` naming it."""

    def missing(name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        raise NotImplementedError(f"torch_nki does not implement {module}.{name} (docs/nki-library.md)")

    return missing


class _AliasLoader(importlib.abc.Loader):
    """Loads an alias as the module it stands for (the same object, not a copy)."""

    def __init__(self, target: str) -> None:
        self.target = target

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> types.ModuleType:
        return importlib.import_module(self.target)

    def exec_module(self, module: types.ModuleType) -> None:
        pass


class _AliasFinder(importlib.abc.MetaPathFinder):
    """Finds a submodule of an aliased module (``nki.collectives`` once ``sys.modules["nki"]``
    is the tree's ``nki``, whoever put it there) as the frontend's own module
    (``torch_nki.nki.collectives``)."""

    def __init__(self) -> None:
        self.roots: list[types.ModuleType] = []

    def find_spec(self, fullname: str, path: Any = None, target: Any = None) -> Any:
        parent_name, _, child = fullname.rpartition(".")
        parent = sys.modules.get(parent_name)
        if parent is None:
            return None
        if any(parent is root for root in self.roots):
            real = f"torch_nki.nki.{child}"
        elif parent.__name__ != parent_name and f"{parent.__name__}.{child}" in sys.modules:
            # A module of the tree under another name (`nki.compiler` is the tree's
            # `compiler`): its registered submodule (`compiler.frontend`).
            return importlib.machinery.ModuleSpec(fullname, _AliasLoader(f"{parent.__name__}.{child}"))
        elif parent.__name__.startswith("torch_nki.nki") and parent.__name__ != parent_name:
            real = f"{parent.__name__}.{child}"
        else:
            return None
        if importlib.util.find_spec(real) is None:
            return None
        return importlib.machinery.ModuleSpec(fullname, _AliasLoader(real))


_FINDER = _AliasFinder()


def install(package: str) -> types.ModuleType:
    """Registers the simulator package's ``nki`` module tree under ``package`` (``package.nki``,
    ``package.nki.language``, ...) in ``sys.modules`` and returns ``package.nki``. The tree is
    built once; installing it again returns the same modules."""
    existing = sys.modules.get(f"{package}.nki")
    if existing is not None:
        return existing
    root = f"{package}.nki"
    dtypes = _module(
        f"{root}.language.dtypes",
        "The element types, as nki.language has them.",
        **{d.nki_name: d for d in language.DTYPES},
    )
    builtin = _module(f"{root}.builtin", "The simulator's builtins (none are used by kernels).")
    builtin.__getattr__ = _unavailable("nki.builtin")  # type: ignore[method-assign]
    compiler_frontend = _module(
        f"{root}.compiler.frontend",
        _trace_only.__doc__ or "",
        NKIFrontend=_trace_only.NKIFrontend,
        ParserFrontend=_trace_only.ParserFrontend,
        TracerFrontend=_trace_only.TracerFrontend,
    )
    compiler = _module(
        f"{root}.compiler",
        "The compiler's modules: only its frontend, for trace-only tests.",
        frontend=compiler_frontend,
    )
    compiler.__path__ = []  # a package, so `nki.compiler.frontend` imports
    compiler.__getattr__ = _unavailable("nki.compiler")  # type: ignore[method-assign]
    tensor = _module(f"{root}.tensor", "The tensor type kernels annotate with.", HbmTensor=HbmTensor)
    nki = _module(
        root,
        frontend.__doc__ or "",
        # `import nki.dtype as nt` reads the package attribute first: it is the element types,
        # as the suite's framework aliases `nki.dtype` (not the frontend's annotation type).
        **{name: getattr(frontend, name) for name in frontend.__all__ if name != "dtype"},
        dtype=dtypes,
        cpu_simulate=cpu_simulate,
        collectives=collectives,
        builtin=builtin,
        compiler=compiler,
        tensor=tensor,
    )
    nki.__path__ = []  # a package, so its submodules import
    modules = {
        root: nki,
        f"{root}.builtin": builtin,
        f"{root}.compiler": compiler,
        f"{root}.compiler.frontend": compiler_frontend,
        f"{root}.collectives": collectives,
        f"{root}.isa": isa,
        f"{root}.isa.constants": isa.constants,
        f"{root}.language": language,
        f"{root}.language.dtypes": dtypes,
        f"{root}.tensor": tensor,
        f"{root}.typing": typing,
    }
    sys.modules.update(modules)
    _FINDER.roots.append(nki)
    if _FINDER not in sys.meta_path:
        sys.meta_path.append(_FINDER)
    # `import package.nki.language.dtypes as d` reads it as an attribute of the language module.
    language.dtypes = dtypes
    parent = sys.modules.get(package)
    if parent is not None:
        parent.nki = nki  # type: ignore[attr-defined]
    return nki


def alias(package: str, name: str = "nki") -> None:
    """Makes ``import nki`` (``name``) and its submodules give the tree installed under
    ``package`` (what nki-library's framework does after importing the simulator)."""
    root = f"{package}.nki"
    install(package)
    for key, module in list(sys.modules.items()):
        if key == root or key.startswith(root + "."):
            sys.modules[name + key[len(root) :]] = module
    sys.modules[f"{name}.dtype"] = sys.modules[f"{root}.language.dtypes"]

"""``torch_nki.load``: kernels from crates outside this repository.

A kernel crate depends on ``nki-core`` (for ``#[kernel]`` and the tile language) and
``nki-python`` (the native module body), is built as a ``cdylib``, and declares its module with
``nki_python::nki_module!(NAME)`` where ``NAME`` is its ``[lib]`` name (``examples/kernel-crate``
is a template). ``torch_nki.load(path)`` takes the built library, or the crate directory, which
it builds with ``cargo build --release``; it checks that the module was built against the same
nki-core and module protocol as this package, and registers every kernel as
``torch.ops.<namespace>.<name>`` (``neuron`` by default) with the same CPU, fake, autograd and
autocast kernels as the built-in ops. Loaded ops are listed by :func:`torch_nki.ops` and
``torch-nki list`` and raise :class:`torch_nki.NkiError` subclasses.

After editing a crate, :func:`unload` its module and :func:`load` it again: the rebuilt library
is mapped from a content-addressed copy (``dlopen`` of a path already mapped, or of another name
for the same file, returns the library mapped first, so the process would keep running the old
code) and its ops replace the old ones. A rebuilt library is refused while the old one is still
loaded: one module name holds one library's ops at a time.
"""

from __future__ import annotations

import atexit
import importlib.machinery
import importlib.util
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

from torch_nki import _library_check, _native
from torch_nki._register import NAMESPACE, Registration, register, unregister
from torch_nki.errors import PluginError

__all__ = ["LoadedModule", "build", "load", "loaded", "unload"]

PLUGINS_ENV = "TORCH_NKI_PLUGINS"
"""``os.pathsep``-separated ``PATH`` or ``PATH=NAMESPACE`` entries loaded at ``import torch_nki``."""


@dataclass(frozen=True)
class LoadedModule:
    """A kernel module ``load`` registered."""

    name: str
    """The Python module name (the crate's ``[lib]`` name)."""
    path: Path
    """The library file."""
    namespace: str
    registration: Registration
    mapped: Path | None = None
    """The file the process mapped, when it is not ``path``: a content-addressed copy, for a
    build loaded after another build of the same module was unloaded."""

    @property
    def ops(self) -> list[str]:
        """The op names it defined in ``torch.ops.<namespace>``, sorted."""
        return sorted(self.registration.op_names())


@dataclass
class _Image:
    """One build of a module mapped into the process (it stays mapped after ``unload``)."""

    library: _library_check.Library
    """The file as first checked (its path is the one ``load`` reports for these contents)."""
    module: ModuleType
    """The imported module, registered again when the same build is loaded again."""


_lock = threading.RLock()
_loaded: dict[Path, LoadedModule] = {}
_images: dict[str, dict[str, _Image]] = {}
"""Every build imported so far: module name → contents digest → image."""
_copies: list[Path] = []


def loaded() -> list[LoadedModule]:
    """Every module loaded so far."""
    return list(_loaded.values())


def _library_suffixes() -> tuple[str, ...]:
    return (".so", ".dylib", ".pyd", ".dll")


def build(crate: str | os.PathLike[str]) -> Path:
    """Builds the kernel crate at ``crate`` (a directory with ``Cargo.toml``) with
    ``cargo build --release`` and returns its ``cdylib``."""
    crate_dir = Path(crate).resolve()
    manifest = crate_dir / "Cargo.toml"
    if not manifest.is_file():
        raise PluginError(f"torch_nki.load: {crate_dir} has no Cargo.toml (expected a kernel crate)")
    cargo = shutil.which("cargo")
    if cargo is None:
        raise PluginError(
            f"torch_nki.load: building the kernel crate at {crate_dir} needs cargo, which is not on "
            "PATH; install Rust (https://rustup.rs) or pass the built library "
            "(target/release/lib<name>.so)"
        )
    cmd = [cargo, "build", "--release", "--message-format=json-render-diagnostics"]
    cmd += ["--manifest-path", str(manifest)]
    # Built as an extension module (libpython left to the interpreter that loads it), the way
    # maturin builds torch_nki._native; without the variable the crate's `cargo test` links
    # libpython, so its test binaries run.
    env = {**os.environ, "PYO3_BUILD_EXTENSION_MODULE": "1"}
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False, env=env)
    if proc.returncode != 0:
        tail = "\n".join(proc.stderr.strip().splitlines()[-30:])
        raise PluginError(f"torch_nki.load: `cargo build --release` failed for {crate_dir}:\n{tail}")
    libraries = []
    for line in proc.stdout.splitlines():
        try:
            msg = json.loads(line)
        except json.JSONDecodeError:
            continue
        if msg.get("reason") != "compiler-artifact" or "cdylib" not in msg.get("target", {}).get("kind", []):
            continue
        if Path(msg.get("manifest_path", "")).resolve() != manifest:
            continue
        libraries += [Path(f) for f in msg.get("filenames", []) if f.endswith(_library_suffixes())]
    if not libraries:
        raise PluginError(
            f'torch_nki.load: building {crate_dir} produced no cdylib; set `crate-type = ["cdylib"]` '
            "in its [lib] section"
        )
    return libraries[0]


def _module_name(library: Path) -> str:
    name = library.name.split(".", 1)[0]
    return name.removeprefix("lib") if library.suffix in (".so", ".dylib") else name


def _import(library: Path, name: str) -> ModuleType:
    loader = importlib.machinery.ExtensionFileLoader(name, str(library))
    spec = importlib.util.spec_from_file_location(name, library, loader=loader)
    if spec is None:
        raise PluginError(f"torch_nki.load: cannot load {library} as a Python extension module")
    try:
        module = importlib.util.module_from_spec(spec)
        loader.exec_module(module)
    except ImportError as err:
        raise PluginError(
            f"torch_nki.load: {library} is not a torch-nki kernel module ({err}); the crate must "
            f"declare `nki_python::nki_module!({name});` with its [lib] name `{name}`"
        ) from err
    sys.modules[name] = module
    return module


def _check_marker(library: _library_check.Library) -> None:
    """Refuses a library whose module marker names another protocol or nki-core version."""
    if library.marker is not None and library.marker != tuple(_native.versions()):
        _refuse_versions(library.path, library.marker)


def _refuse_versions(library: Path, theirs: tuple[int, str]) -> None:
    ours = tuple(_native.versions())
    raise PluginError(
        f"torch_nki.load: {library} was built against nki-core {theirs[1]} (module protocol "
        f"{theirs[0]}), but this torch_nki uses nki-core {ours[1]} (module protocol {ours[0]}); "
        "rebuild the crate against this torch-nki"
    )


def _refuse_sys_module(library: Path, name: str) -> None:
    """Refuses a module name Python already imported from something ``load`` did not map."""
    other = sys.modules.get(name)
    if other is not None:
        raise PluginError(
            f"torch_nki.load: {library} defines module {name}, but a module of that name is "
            f"already imported from {getattr(other, '__file__', None) or 'elsewhere'}; give the "
            "crate another [lib] name"
        )


def _refuse_while_loaded(library: _library_check.Library, name: str) -> None:
    """Refuses another build of module ``name`` while a build of it is loaded, naming both files."""
    live = next((m for m in _loaded.values() if m.name == name), None)
    if live is None:
        return
    change = (
        "was rebuilt since it was loaded"
        if live.path == library.path
        else f"defines module {name}, already loaded from {live.path} with other contents"
    )
    raise PluginError(
        f"torch_nki.load: {library.path} {change}; a process holds one library per module name "
        f"and would keep running the loaded one's code: unload it first (torch_nki.plugins.unload, "
        f"its ops in torch.ops.{live.namespace}) to load the new build in its place, or give the "
        "crate another [lib] name"
    )


def _copy_dir() -> Path:
    """This process's directory of content-addressed library copies (removed at exit)."""
    if not _copies:
        _copies.append(Path(tempfile.mkdtemp(prefix="torch-nki-builds-")))
        atexit.register(shutil.rmtree, _copies[0], True)
    return _copies[0]


def _content_addressed_copy(library: _library_check.Library) -> Path:
    """A copy of ``library`` at a path named by its digest: a new file, so ``dlopen`` maps it
    afresh instead of returning the build it mapped from the original path."""
    try:
        dst = _copy_dir() / library.digest[:32] / library.path.name
        if not dst.exists():
            dst.parent.mkdir(parents=True, exist_ok=True)
            partial = dst.with_name(dst.name + ".partial")
            shutil.copyfile(library.path, partial)
            os.replace(partial, dst)
    except OSError as err:
        raise PluginError(
            f"torch_nki.load: cannot copy {library.path} to a fresh path to load its new build "
            f"({err}); set TMPDIR to a writable directory, or restart Python to load it"
        ) from err
    return dst


def _check_versions(module: ModuleType, library: Path) -> None:
    versions = getattr(module, "versions", None)
    if versions is None:
        raise PluginError(f"torch_nki.load: {library} is a Python module but not a torch-nki kernel module")
    theirs = tuple(versions())
    if theirs != tuple(_native.versions()):
        _refuse_versions(library, (int(theirs[0]), str(theirs[1])))


def load(path: str | os.PathLike[str], namespace: str = NAMESPACE) -> LoadedModule:
    """Loads a kernel module (a built library, or a crate directory to build) and registers its
    kernels as ``torch.ops.<namespace>.<name>``. Loading the same library into the same
    namespace again returns the first load; a rebuilt library of a module that was unloaded is
    mapped afresh and runs its new code (see the module documentation)."""
    if not namespace.isidentifier():
        raise PluginError(f"torch_nki.load: namespace {namespace!r} is not a Python identifier")
    source = Path(path).resolve()
    if not source.exists():
        raise PluginError(f"torch_nki.load: {source} does not exist")
    library = build(source) if source.is_dir() else source
    with _lock:
        # Read and checked before it is mapped: a damaged file is an error, not a SIGBUS.
        name = _module_name(library)
        checked = _library_check.check(library, name, Path(_native.__file__ or ""))
        builds = _images.get(name, {})
        image = builds.get(checked.digest)
        if image is not None:  # these contents were mapped before (maybe from another path)
            done = next((m for m in _loaded.values() if m.registration.native is image.module), None)
            if done is not None:
                if done.namespace != namespace:
                    raise PluginError(
                        f"torch_nki.load: {image.library.path} is already loaded into "
                        f"torch.ops.{done.namespace}"
                    )
                return done
            _refuse_while_loaded(checked, name)
            return _register(image, namespace)
        _refuse_while_loaded(checked, name)
        if builds:
            mapped = _content_addressed_copy(checked)
        else:
            _refuse_sys_module(library, name)
            mapped = library
        _check_marker(checked)
        module = _import(mapped, name)
        _check_versions(module, library)
        image = _Image(checked, module)
        builds[checked.digest] = image
        _images[name] = builds
        return _register(image, namespace)


def _register(image: _Image, namespace: str) -> LoadedModule:
    """Registers ``image``'s module in ``namespace`` (the module name it is known by in
    ``sys.modules`` is now this build's)."""
    module, path = image.module, image.library.path
    registration = register(module, namespace, source=str(path))
    sys.modules[module.__name__] = module
    file = Path(module.__file__ or path)
    result = LoadedModule(module.__name__, path, namespace, registration, None if file == path else file)
    _loaded[path] = result
    return result


def unload(module: LoadedModule) -> None:
    """Removes the kernels of the ops ``module`` registered: calling one raises
    :class:`~torch_nki.PluginError` saying it was unloaded. The library stays mapped in the
    process; loading the crate again (rebuilt or not, into any namespace) registers its ops
    again, and handles to the old ops (``torch.ops`` lookups, compiled graphs) run the new
    kernels. An op whose schema changed is refused (restart Python for it)."""
    with _lock:
        if _loaded.get(module.path) is module:
            unregister(module.registration)
            del _loaded[module.path]


def load_from_environment() -> list[LoadedModule]:
    """Loads every entry of ``$TORCH_NKI_PLUGINS`` (``PATH`` or ``PATH=NAMESPACE``)."""
    out = []
    for entry in filter(None, os.environ.get(PLUGINS_ENV, "").split(os.pathsep)):
        path, _, namespace = entry.partition("=")
        out.append(load(path, namespace or NAMESPACE))
    return out

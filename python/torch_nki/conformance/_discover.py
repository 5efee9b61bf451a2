"""What a source file declares, read without running it: its ``@nki.jit`` kernels, whether it
has a ``__main__`` block, and which sibling kernels it imports. Running a file can fail before
its kernels exist (a missing module at the top); the static view still names them."""

from __future__ import annotations

import ast
from dataclasses import dataclass, field
from pathlib import Path


@dataclass(frozen=True)
class SourceInfo:
    """The static facts about one ``.py`` file."""

    kernels: tuple[str, ...]
    """Names of the functions decorated with ``...jit`` (``@nki.jit``, ``@jit``,
    ``@nki.jit(...)``, torch_neuronx's ``@nki_jit``), in source order."""
    is_driver: bool
    """It has an ``if __name__ == "__main__":`` block."""
    imports: tuple[tuple[str, str], ...] = field(default=())
    """``(module, name)`` pairs of ``from module import name`` (``*`` for a star import) and
    ``(module, "*")`` for ``import module``, top-level modules only."""
    syntax_error: str | None = None
    """The ``SyntaxError`` when the file does not parse."""


def _decorator_name(node: ast.expr) -> str:
    if isinstance(node, ast.Call):
        node = node.func
    if isinstance(node, ast.Attribute):
        return node.attr
    if isinstance(node, ast.Name):
        return node.id
    return ""


def _is_main_test(node: ast.expr) -> bool:
    if not isinstance(node, ast.Compare) or len(node.ops) != 1 or not isinstance(node.ops[0], ast.Eq):
        return False
    sides = [node.left, *node.comparators]
    names = [s for s in sides if isinstance(s, ast.Name) and s.id == "__name__"]
    mains = [s for s in sides if isinstance(s, ast.Constant) and s.value == "__main__"]
    return bool(names) and bool(mains)


def scan(path: Path) -> SourceInfo:
    """The :class:`SourceInfo` of ``path`` (decoded as UTF-8, undecodable bytes replaced)."""
    source = path.read_bytes().decode("utf-8", errors="replace")
    try:
        tree = ast.parse(source, str(path))
    except SyntaxError as e:
        return SourceInfo((), False, (), f"SyntaxError: {e.msg} (line {e.lineno})")
    kernels: list[str] = []
    imports: list[tuple[str, str]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            if any(_decorator_name(d).endswith("jit") for d in node.decorator_list):
                kernels.append(node.name)
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            imports.extend((node.module, alias.name) for alias in node.names)
        elif isinstance(node, ast.Import):
            imports.extend((alias.name, "*") for alias in node.names)
    is_driver = any(isinstance(n, ast.If) and _is_main_test(n.test) for n in tree.body)
    return SourceInfo(tuple(dict.fromkeys(kernels)), is_driver, tuple(imports))


def python_files(path: Path) -> list[Path]:
    """``path`` itself when it is a file, else every ``.py`` file below it, sorted by path
    (hidden directories and ``__pycache__`` skipped)."""
    if path.is_file():
        return [path]
    found = []
    for file in path.rglob("*.py"):
        parts = file.relative_to(path).parts
        if any(p.startswith(".") or p == "__pycache__" for p in parts):
            continue
        found.append(file)
    return sorted(found)

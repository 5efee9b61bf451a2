"""``torch_nki/_native.pyi`` describes the native module as it is: every function, class, method
and constant the module exports has a stub and every stub an export, with the same parameter
names and the same parameters defaulted (the types are checked by mypy against the callers)."""

from __future__ import annotations

import ast
import inspect
import types
from pathlib import Path
from typing import Any

import pytest

import torch_nki
from torch_nki import _native

STUB = ast.parse((Path(torch_nki.__file__).parent / "_native.pyi").read_text())


def _stub_params(f: ast.FunctionDef, method: bool) -> list[tuple[str, bool]]:
    """``(name, has a default)`` of a stub's parameters (without ``self`` / ``cls``)."""
    a = f.args
    positional = [*a.posonlyargs, *a.args]
    defaulted = len(positional) - len(a.defaults)
    params = [(p.arg, i >= defaulted) for i, p in enumerate(positional)]
    params += [(p.arg, d is not None) for p, d in zip(a.kwonlyargs, a.kw_defaults, strict=True)]
    return params[1:] if method else params


def _params(f: Any) -> list[tuple[str, bool]]:
    """``(name, has a default)`` of a native callable's parameters, from its text signature."""
    signature = inspect.signature(f)
    return [
        (p.name, p.default is not inspect.Parameter.empty)
        for p in signature.parameters.values()
        if p.name not in ("self", "cls", "$self", "$cls")
    ]


def _stub_members(cls: ast.ClassDef) -> dict[str, ast.FunctionDef]:
    return {f.name: f for f in cls.body if isinstance(f, ast.FunctionDef)}


def _native_members(cls: type) -> dict[str, object]:
    """A class's own methods and properties, with ``__new__`` when it has a constructor."""
    members = {n: v for n, v in vars(cls).items() if not n.startswith("__")}
    if getattr(cls, "__text_signature__", None) is not None:
        members["__new__"] = cls
    return members


STUB_FUNCTIONS = {f.name: f for f in STUB.body if isinstance(f, ast.FunctionDef)}
STUB_CLASSES = {c.name: c for c in STUB.body if isinstance(c, ast.ClassDef)}
STUB_CONSTANTS = {
    a.target.id for a in STUB.body if isinstance(a, ast.AnnAssign) and isinstance(a.target, ast.Name)
}
EXPORTS = {n: v for n, v in vars(_native).items() if not n.startswith("__")}
FUNCTIONS = {n: v for n, v in EXPORTS.items() if isinstance(v, types.BuiltinFunctionType)}
CLASSES = {n: v for n, v in EXPORTS.items() if isinstance(v, type)}
CONSTANTS = set(EXPORTS) - set(FUNCTIONS) - set(CLASSES) - {"_native"}


def test_every_export_has_a_stub_and_every_stub_an_export() -> None:
    assert sorted(STUB_FUNCTIONS) == sorted(FUNCTIONS)
    assert sorted(STUB_CLASSES) == sorted(CLASSES)
    assert sorted(STUB_CONSTANTS) == sorted(CONSTANTS)


@pytest.mark.parametrize("name", sorted(FUNCTIONS))
def test_a_function_stub_has_the_functions_parameters(name: str) -> None:
    stub = STUB_FUNCTIONS.get(name)
    assert stub is not None, f"no stub for {name}"
    assert _stub_params(stub, method=False) == _params(FUNCTIONS[name])


@pytest.mark.parametrize("name", sorted(CLASSES))
def test_a_class_stub_has_the_classes_methods_and_their_parameters(name: str) -> None:
    stub = STUB_CLASSES.get(name)
    assert stub is not None, f"no stub for class {name}"
    stubs, members = _stub_members(stub), _native_members(CLASSES[name])
    assert sorted(stubs) == sorted(members)
    for method, member in members.items():
        if isinstance(member, types.GetSetDescriptorType):
            decorators = [d.id for d in stubs[method].decorator_list if isinstance(d, ast.Name)]
            assert decorators == ["property"], f"{name}.{method} is a property"
        else:
            assert _stub_params(stubs[method], method=True) == _params(member), f"{name}.{method}"

"""No native entry point lets a Rust panic cross into Python: a panic forced through each one
(``_native._force_panic``) comes back as a ``torch_nki.NkiError`` naming the entry point, and
the module keeps working afterwards. The entry points are the module's own list
(``_native._entry_points()``, from their ``#[entry_point]`` declarations); a function, and a
method of a class declared with ``#[entry_point]`` (on an instance made the same way), is called
with sample values chosen by parameter name."""

from __future__ import annotations

import inspect
import types
from collections.abc import Callable
from typing import Any

import pytest
import torch

import torch_nki
from torch_nki import _native

SHAPES, DTYPES = [[4, 4], [4, 4]], ["f32", "f32"]
AT = ("k.py", 2)
"""The kernel source location calls are recorded at."""
WHOLE_X = ("hbm", 0, 0, [(4, 4), (4, 1)])


def _tracer() -> Any:
    return _native.Tracer("k", "trn2", [("x", [4, 4], "f32")])


def _with_tile(call: Callable[[Any, tuple[int, int, int, int, int]], object]) -> Callable[[], object]:
    def run() -> object:
        t = _tracer()
        tile = t.tile(4, 4, "f32", "sbuf", "k.py", 1)
        return call(t, (tile, 0, 4, 0, 4))

    return run


def _closing() -> object:
    t = _tracer()
    t.open_loop(1, "affine", "k.py", 1)
    return t.close_loop()


def _grid_axis() -> object:
    t = _tracer()
    t.set_grid([2], "k.py", 1)
    return t.open_grid_axis(0, 1, "k.py", 1)


ARGUMENTS: dict[str, Callable[[], object]] = {
    "name": lambda: "add",
    "shapes": lambda: SHAPES,
    "dtypes": lambda: DTYPES,
    "scalars": lambda: [],
    "target": lambda: "trn2",
    "inputs": lambda: [torch.rand(4, 4), torch.rand(4, 4)],
    "outputs": lambda: [torch.empty(4, 4)],
    "ns": lambda: "neuron",
    "kind": lambda: "internal",
}
"""A working value for each parameter name of the module's functions (parameters with defaults
are left out), made afresh for each call."""


ENGINE_UNKNOWN = ("enum", "engine", "unknown")


def _method_calls() -> dict[str, Callable[[], object]]:
    """Calls of the NKI frontend's class methods (declared with ``#[entry_point]`` like the
    rest, but their arguments are tiles and regions of a live trace, not sample values)."""
    program = _native.Signature("add", SHAPES, DTYPES, []).program("trn2")
    data = torch.rand(4, 4).numpy().tobytes()
    return {
        "Tracer.__new__": _tracer,
        "Tracer.output": lambda: _tracer().output([4, 4], "f32", "k.py", 1),
        "Tracer.scratch": lambda: _tracer().scratch([4, 4], "f32", "k.py", 1),
        "Tracer.launch_output": lambda: _tracer().launch_output([4, 4], "f32", "k.py", 1),
        "Tracer.tile": lambda: _tracer().tile(4, 4, "f32", "sbuf", "k.py", 1),
        "Tracer.open_loop": lambda: _tracer().open_loop(1, "affine", "k.py", 1),
        "Tracer.close_loop": _closing,
        "Tracer.record": _with_tile(
            lambda t, r: t.record(
                "tensor_copy",
                {"dst": ("tile", *r), "src": ("tile", *r), "engine": ENGINE_UNKNOWN, "name": None},
                *AT,
            )
        ),
        "Tracer.reinterpret_copy": _with_tile(
            lambda t, r: t.reinterpret_copy(("tile", *r), ("tile", *r), *AT)
        ),
        "Tracer.finish": lambda: _tracer().finish([], "k.py", 1),
        "Tracer.launch_prologue": lambda: _tracer().launch_prologue(True),
        "Tracer.constant": lambda: _tracer().constant([1, 2], "f32", [1.0, 2.0], "k.py", 1),
        "Tracer.set_grid": lambda: _tracer().set_grid([2], "k.py", 1),
        "Tracer.open_grid_axis": _grid_axis,
        "Tracer.open_device_loop": lambda: _tracer().open_device_loop("range", 0, 2, 1, "k.py", 1),
        "Program.name": lambda: program.name,
        "Program.target": lambda: program.target,
        "Program.grid": lambda: program.grid,
        "Program.inputs": program.inputs,
        "Program.outputs": program.outputs,
        "Program.instruction_count": program.instruction_count,
        "Program.__repr__": lambda: repr(program),
        "Program.validate": program.validate,
        "Program.simulate": lambda: program.simulate([data, data]),
        "Program.cost": program.cost,
        "Program.emit": program.emit,
        "Program.unrolled": program.unrolled,
        "Program.difference": lambda: program.difference(program),
        "Program.to_json": program.to_json,
    }


METHOD_CALLS = _method_calls()
ENTRY_POINTS: list[str] = _native._entry_points()
DERIVED_CLASSES = sorted({e.split(".")[0] for e in ENTRY_POINTS if "." in e and e not in METHOD_CALLS})
"""Classes whose methods are all declared with ``#[entry_point]``: constructed and called with
sample values by parameter name."""


def _sample_call(name: str, function: Any) -> Callable[[], object]:
    """``function`` called with a sample value for each parameter without a default."""
    required = [
        p.name
        for p in inspect.signature(function).parameters.values()
        if p.default is inspect.Parameter.empty and p.name not in ("self", "$self")
    ]
    missing = [p for p in required if p not in ARGUMENTS]
    assert not missing, f"{name}: no sample value for parameter(s) {missing}: add them to ARGUMENTS"
    return lambda: function(**{p: ARGUMENTS[p]() for p in required})


def _method_call(entry: str) -> Callable[[], object]:
    class_name, method = entry.split(".")
    cls = getattr(_native, class_name)
    make = _sample_call(f"{class_name}.__new__", cls)
    if method == "__new__":
        return make
    member = vars(cls)[method]
    if isinstance(member, types.GetSetDescriptorType):
        return lambda: getattr(make(), method)
    return lambda: _sample_call(entry, getattr(make(), method))()


def _call(entry: str) -> Callable[[], object]:
    if "." not in entry:
        return _sample_call(entry, getattr(_native, entry))
    return METHOD_CALLS[entry] if entry in METHOD_CALLS else _method_call(entry)


def test_the_list_is_every_exported_function_and_the_frontend_methods() -> None:
    functions = sorted(
        n
        for n, v in vars(_native).items()
        if isinstance(v, types.BuiltinFunctionType) and n != "_force_panic"
    )
    assert [e for e in ENTRY_POINTS if "." not in e] == functions
    derived = [
        f"{name}.{member}"
        for name in DERIVED_CLASSES
        for member in ("__new__", *(n for n in vars(getattr(_native, name)) if not n.startswith("__")))
    ]
    assert [e for e in ENTRY_POINTS if "." in e] == sorted([*METHOD_CALLS, *derived])
    assert "Signature" in DERIVED_CLASSES
    assert sorted(set(ENTRY_POINTS)) == ENTRY_POINTS, "listed once each, sorted"


@pytest.mark.parametrize("entry", ENTRY_POINTS)
def test_a_forced_panic_is_an_nki_error_naming_the_entry_point(entry: str) -> None:
    call = _call(entry)
    if entry == "_error_example":
        with pytest.raises(torch_nki.NkiError, match="an impossible state"):
            call()
    else:
        call()  # works normally
    _native._force_panic(entry)
    with pytest.raises(torch_nki.NkiError, match=rf"native entry point `{entry}` panicked: forced panic"):
        call()
    if entry != "_error_example":
        call()  # and again afterwards


def test_unknown_entry_points_cannot_be_armed() -> None:
    with pytest.raises(KeyError, match="no native entry point `nope`"):
        _native._force_panic("nope")

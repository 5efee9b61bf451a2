"""No native entry point lets a Rust panic cross into Python: a panic forced through each one
(``_native._force_panic``) comes back as a ``torch_nki.NkiError`` naming the entry point, and
the module keeps working afterwards."""

from __future__ import annotations

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


ENGINE_UNKNOWN = ("enum", "engine", "unknown")


def _calls() -> dict[str, Callable[[], object]]:
    x = torch.rand(4, 4)
    program = _native.program("add", SHAPES, DTYPES, [], "trn2")
    data = x.numpy().tobytes()
    return {
        "versions": _native.versions,
        "huge_pages": _native.huge_pages,
        "set_namespace": lambda: _native.set_namespace("neuron"),
        "manifest": _native.manifest,
        "names": _native.names,
        "check": lambda: _native.check("add", SHAPES, DTYPES, []),
        "symbolic": lambda: _native.symbolic("add", [["s0", 4], ["s0", 4]], DTYPES, []),
        "tolerance": lambda: _native.tolerance("add", SHAPES, DTYPES, []),
        "run": lambda: _native.run("add", [x, x], [], [torch.empty(4, 4)]),
        "cost": lambda: _native.cost("add", SHAPES, DTYPES, [], "trn2"),
        "emit": lambda: _native.emit("add", SHAPES, DTYPES, [], "trn2"),
        "program": lambda: _native.program("add", SHAPES, DTYPES, [], "trn2"),
        "index_domains": lambda: _native.index_domains("add", SHAPES, DTYPES, []),
        "nki_api": _native.nki_api,
        "nki_spec": _native.nki_spec,
        "cache_size": _native.cache_size,
        "cache_capacity": lambda: _native.cache_capacity(None),
        "disk_cache_dir": _native.disk_cache_dir,
        "disk_cache_info": _native.disk_cache_info,
        "disk_cache_clear": _native.disk_cache_clear,
        "_error_example": lambda: _native._error_example("internal"),
        "_fast_api": _native._fast_api,
        "_armed": _native._armed,
        "Tracer.__new__": _tracer,
        "Tracer.output": lambda: _tracer().output([4, 4], "f32", "k.py", 1),
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
        "Tracer.finish": lambda: _tracer().finish([]),
        "Program.validate": program.validate,
        "Program.simulate": lambda: program.simulate([data, data]),
        "Program.cost": program.cost,
        "Program.emit": program.emit,
        "Program.unrolled": program.unrolled,
        "Program.difference": lambda: program.difference(program),
        "Program.to_json": program.to_json,
    }


CALLS = _calls()


def test_every_entry_point_is_exercised() -> None:
    assert sorted(CALLS) == sorted(_native._entry_points())


@pytest.mark.parametrize("entry", sorted(CALLS))
def test_a_forced_panic_is_an_nki_error_naming_the_entry_point(entry: str) -> None:
    call = CALLS[entry]
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

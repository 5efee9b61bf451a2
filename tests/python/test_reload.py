"""Reloading an edited kernel crate in the same process runs its new code.

A copy of the template crate (``examples/kernel-crate``) under another ``[lib]`` name is built
into the template's cargo target directory (only the copy compiles), loaded, edited, rebuilt at
the same path and loaded again after ``torch_nki.plugins.unload``: the new build is mapped from a
content-addressed copy, so its numbers are the new kernel's — through a fresh ``torch.ops``
lookup, through a handle taken before the reload, and through a graph ``torch.compile`` captured
before it. Loading a rebuilt crate while the old build is loaded, and a build whose op schema
changed, are refused with a ``PluginError`` saying why and what to do.
"""

from __future__ import annotations

import os
import re
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
import torch

import torch_nki
from torch_nki import plugins

ROOT = Path(__file__).resolve().parents[2]
TEMPLATE = ROOT / "examples" / "kernel-crate"
LIB = "reload_kernels"
NS = "nki_reload"
# rstd = rsqrt(Σh²/D + eps): the edit divides by 4·D instead, which doubles y (up to eps).
SCALE_LINE = "BinOp::Multiply, 1.0 / d as f32)"
EDITED_LINE = "BinOp::Multiply, 1.0 / (4 * d) as f32)"


def _make_crate(dst: Path) -> Path:
    """A copy of the template crate named ``LIB``, with absolute paths to this checkout."""
    dst.mkdir(parents=True)
    lib = re.search(r'\[lib\]\n(?:#.*\n)*name = "(\w+)"', (TEMPLATE / "Cargo.toml").read_text())
    assert lib, "the template's Cargo.toml names its [lib]"
    old_lib, old_pkg = lib.group(1), lib.group(1).replace("_", "-")
    for name in ("Cargo.toml", "Cargo.lock"):
        text = (TEMPLATE / name).read_text(encoding="utf-8")
        text = text.replace(f'"{old_pkg}"', f'"{LIB.replace("_", "-")}"').replace(f'"{old_lib}"', f'"{LIB}"')
        (dst / name).write_text(text.replace('path = "../../', f'path = "{ROOT}/'), encoding="utf-8")
    source = (TEMPLATE / "src" / "lib.rs").read_text(encoding="utf-8")
    assert SCALE_LINE in source, "the template's rstd line changed: update this test's edit"
    (dst / "src").mkdir()
    (dst / "src" / "lib.rs").write_text(
        source.replace(f"nki_module!({old_lib})", f"nki_module!({LIB})"), encoding="utf-8"
    )
    return dst


def _edit(crate: Path, old: str, new: str) -> None:
    lib = crate / "src" / "lib.rs"
    text = lib.read_text(encoding="utf-8")
    assert old in text
    lib.write_text(text.replace(old, new, 1), encoding="utf-8")


@pytest.fixture
def crate(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    # The template's target directory: its dependencies are built once for every suite.
    monkeypatch.setenv("CARGO_TARGET_DIR", os.environ.get("CARGO_TARGET_DIR", str(TEMPLATE / "target")))
    yield _make_crate(tmp_path / "crate")
    for module in plugins.loaded():
        if module.namespace == NS:
            plugins.unload(module)


def _y(*args: torch.Tensor) -> torch.Tensor:
    return torch.ops.nki_reload.residual_rmsnorm(*args)[1]


def test_an_edited_crate_reloads_and_runs_its_new_code(crate: Path, tmp_path: Path) -> None:
    g = torch.Generator().manual_seed(0)
    x, r, w = torch.rand(5, 8, generator=g), torch.rand(5, 8, generator=g), torch.rand(8, generator=g)
    first = torch_nki.load(crate, namespace=NS)
    assert first.mapped is None  # the first build of a module is mapped from where it was built
    held = torch.ops.nki_reload.residual_rmsnorm.default  # a handle taken before the reload
    compiled = torch.compile(_y, fullgraph=True)
    before = _y(x, r, w)
    torch.testing.assert_close(compiled(x, r, w), before)

    _edit(crate, SCALE_LINE, EDITED_LINE)
    with pytest.raises(torch_nki.PluginError, match=r"was rebuilt since it was loaded; .*unload it first"):
        torch_nki.load(crate, namespace=NS)  # the old build is still loaded: refused, not stale

    plugins.unload(first)
    with pytest.raises(torch_nki.PluginError, match=rf"{NS}::residual_rmsnorm was unloaded"):
        held(x, r, w)
    second = torch_nki.load(crate, namespace=NS)
    assert second.path == first.path and second.mapped is not None and second.mapped != second.path
    assert second.mapped.name == first.path.name
    after = _y(x, r, w)
    # y = ĥ · weight with ĥ doubled: the new kernel's numbers (eps is 1e-6, h ~ 1)
    torch.testing.assert_close(after, 2 * before, rtol=1e-4, atol=1e-5)
    torch.testing.assert_close(held(x, r, w)[1], after)
    torch.testing.assert_close(compiled(x, r, w), after)
    xg = x.clone().requires_grad_()
    _y(xg, r, w).sum().backward()
    assert xg.grad is not None and torch.isfinite(xg.grad).all()

    # Back to the first source: the first build (still mapped) is registered again; the second
    # build, from another path, is then refused while the first is loaded.
    kept = tmp_path / "second" / second.path.name
    kept.parent.mkdir()
    shutil.copy(second.path, kept)
    plugins.unload(second)
    _edit(crate, EDITED_LINE, SCALE_LINE)
    third = torch_nki.load(crate, namespace=NS)
    assert third.mapped is None and third.registration.native is first.registration.native
    torch.testing.assert_close(_y(x, r, w), before)
    clash = f"{kept} defines module {LIB}, already loaded from {first.path} with other contents"
    with pytest.raises(torch_nki.PluginError, match=re.escape(clash)):
        torch_nki.load(kept, namespace=NS)


def test_a_changed_schema_is_refused_naming_both(crate: Path) -> None:
    first = torch_nki.load(crate, namespace=NS)
    plugins.unload(first)
    _edit(crate, "#[default(1e-6)] eps: f32,", "#[default(1e-6)] eps: f32, #[default(1.0)] scale: f32,")
    with pytest.raises(torch_nki.PluginError) as info:
        torch_nki.load(crate, namespace=NS)
    message = str(info.value)
    assert f"cannot register {NS}::residual_rmsnorm from" in message
    assert "float eps=1e-06) -> (Tensor, Tensor)`, and this build's schema is `" in message
    assert "float scale=1.0) -> (Tensor, Tensor)`" in message
    assert "restart Python to use the new schema, or load the crate into another namespace" in message
    assert not any(op.startswith(f"{NS}::") for op in torch_nki.ops())

"""Packaging: how a wheel is tied to one torch (``scripts/tie_wheel.py``, ``torch_nki._fast``'s
prebuilt library names) and the pinned dependencies (``constraints/``). The wheels themselves are
built, installed in fresh virtualenvs and tested there by ``scripts/wheel_smoke.sh``
(``tests/wheel``)."""

from __future__ import annotations

import importlib.util
import re
import sys
from pathlib import Path
from types import ModuleType

import pytest
import torch

from torch_nki import _fast

ROOT = Path(__file__).resolve().parents[2]
CONSTRAINTS = ROOT / "constraints"

METADATA = """Metadata-Version: 2.4
Name: torch-nki
Version: 0.1.0
Requires-Dist: torch>=2.13
Requires-Dist: numpy ; extra == 'nki'
Requires-Dist: torchvision ; extra == 'vision'
Summary: NKI kernels
"""


@pytest.fixture(scope="module")
def tie_wheel() -> ModuleType:
    spec = importlib.util.spec_from_file_location("tie_wheel", ROOT / "scripts" / "tie_wheel.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["tie_wheel"] = module
    spec.loader.exec_module(module)
    return module


def test_torch_minor() -> None:
    assert _fast.torch_minor("2.13.0+cu130") == "2.13"
    assert _fast.torch_minor("2.16.0a0+git1234") == "2.16"
    assert _fast.torch_minor() == ".".join(torch.__version__.split(".")[:2])
    with pytest.raises(ValueError, match=r"torch version 'nightly' does not start with MAJOR\.MINOR"):
        _fast.torch_minor("nightly")


def test_prebuilt_names_are_keyed_by_torch_minor_and_source() -> None:
    a, b = _fast.prebuilt_name("2.13"), _fast.prebuilt_name("2.14")
    assert re.fullmatch(r"_fast_ops-torch2\.13-[0-9a-f]{16}\.so", a), a
    assert a.split("-")[-1] == b.split("-")[-1] and a != b
    assert _fast.prebuilt_name() == _fast.prebuilt_name(_fast.torch_minor())


def test_retag_pins_the_torch_and_labels_the_version(tie_wheel: ModuleType) -> None:
    text = tie_wheel.retag_metadata(METADATA, "torch2.13", "torch==2.13.*")
    assert "Version: 0.1.0+torch2.13\n" in text
    assert "Requires-Dist: torch==2.13.*\n" in text and "torch>=2.13" not in text
    assert "Requires-Dist: numpy ; extra == 'nki'" in text
    assert "Requires-Dist: torchvision ; extra == 'vision'" in text


@pytest.mark.parametrize(
    ("metadata", "error"),
    [
        (METADATA.replace("Requires-Dist: torch>=2.13\n", ""), "0 unconditional torch requirements"),
        (METADATA.replace("Version: 0.1.0", "Version: 0.1.0+torch2.15"), "already has a local label"),
        (METADATA.replace("Version: 0.1.0\n", ""), "0 'Version:' lines"),
    ],
)
def test_retag_rejects_unexpected_metadata(tie_wheel: ModuleType, metadata: str, error: str) -> None:
    with pytest.raises(ValueError, match=error):
        tie_wheel.retag_metadata(metadata, "torch2.13", "torch==2.13.*")


def test_tie_rejects_what_is_not_a_wheel(tie_wheel: ModuleType, tmp_path: Path) -> None:
    bogus = tmp_path / "torch_nki-0.1.0.tar.gz"
    bogus.write_text("")
    with pytest.raises(ValueError, match="is not a wheel file"):
        tie_wheel.tie(bogus, tmp_path)
    assert tie_wheel.main([str(bogus), str(tmp_path)]) == 1


def _pins(path: Path) -> dict[str, str]:
    lines = path.read_text().splitlines()
    return dict(line.split("==", 1) for line in lines if line and not line.startswith("#"))


def test_every_supported_torch_minor_is_locked_and_the_newest_is_installed() -> None:
    floor = re.search(r'"torch>=(\d+)\.(\d+)"', (ROOT / "python" / "pyproject.toml").read_text())
    assert floor is not None, "python/pyproject.toml declares no torch>=X.Y"
    newest = _pins(CONSTRAINTS / "dev.txt")["torch"]
    assert torch.__version__.split("+")[0] == newest, "the virtualenv's torch is not constraints/dev.txt's"
    major, low = int(floor[1]), int(floor[2])
    high = int(newest.split(".")[1])
    expected = {f"{major}.{m}" for m in range(low, high + 1)}
    locked = {
        p.name.removeprefix("smoke-torch").removesuffix(".txt") for p in CONSTRAINTS.glob("smoke-torch*.txt")
    }
    assert locked == expected, "run scripts/lock.sh"
    for minor in expected:
        pinned = _pins(CONSTRAINTS / f"smoke-torch{minor}.txt")["torch"]
        assert pinned.startswith(f"{minor}."), (minor, pinned)
    assert _pins(CONSTRAINTS / f"smoke-torch{major}.{high}.txt")["torch"] == newest

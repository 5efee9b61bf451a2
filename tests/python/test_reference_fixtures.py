"""The fixture staleness check of ``tests/reference/generate.py``: ATen's summation order may
differ between machines, a changed reference may not pass."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import numpy as np
import pytest


def _generate() -> ModuleType:
    path = Path(__file__).resolve().parents[1] / "reference" / "generate.py"
    spec = importlib.util.spec_from_file_location("reference_generate", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up
    spec.loader.exec_module(module)
    return module


GENERATE = _generate()


def _bytes(values: np.ndarray) -> bytes:
    return values.astype("<f4").tobytes()


ROW = np.array([3.0, -2.5, 1e-6, 0.75], dtype=np.float32)


def test_identical_and_reordered_sums_pass() -> None:
    eps = float(np.finfo(np.float32).eps)
    # A cancelling element off by a few eps of the largest output, as another summation order.
    reordered = ROW.copy()
    reordered[2] += 5 * eps * 3.0
    assert GENERATE.within_reordering("matmul_1x4_f32.bin", _bytes(ROW), _bytes(ROW))
    assert GENERATE.within_reordering("matmul_1x4_f32.bin", _bytes(ROW), _bytes(reordered))


@pytest.mark.parametrize(
    ("name", "change"),
    [("matmul_1x4_f32.bin", 1e-4), ("softmax_1x4_bf16.bin", 0.05), ("softmax_1x4_f16.out.bin", 0.01)],
)
def test_a_changed_reference_fails(name: str, change: float) -> None:
    changed = ROW.copy()
    changed[0] *= 1 + change
    assert not GENERATE.within_reordering(name, _bytes(ROW), _bytes(changed))


def test_other_files_and_lengths_must_match_exactly() -> None:
    assert not GENERATE.within_reordering("cases.json", b"{}", b"{ }")
    assert not GENERATE.within_reordering("matmul_1x4_f32.bin", _bytes(ROW), _bytes(ROW[:3]))

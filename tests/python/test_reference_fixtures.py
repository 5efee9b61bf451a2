"""``tests/reference/generate.py``: its staleness check (ATen's summation order may differ
between machines, a changed reference may not pass) and its seeding (adding a kernel changes no
other kernel's fixtures)."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from torch_nki._manifest import OpSpec

from refs import generator

GENERATE = generator()


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


# A kernel that sorts before every registered one, so any seeding that depends on an op's
# position (a counter over the ops in order) would shift every other case.
THROWAWAY = "aaa_throwaway"


@pytest.fixture
def throwaway_kernel(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Registers (for the generator, in process) a throwaway kernel: the first registered op's
    samples, contract and reference under the name ``THROWAWAY``; returns the ops with it first."""
    from torch_nki import testing

    ops = testing.ops_with_reference()
    base = ops[0]
    real_lookup, real_domains = testing._lookup, testing.index_domains

    def lookup(op: str) -> tuple[Any, OpSpec]:
        if op == THROWAWAY:
            reg, spec = real_lookup(base)
            return reg, dataclasses.replace(spec, name=THROWAWAY)
        return real_lookup(op)

    def domains(spec: OpSpec, *args: Any) -> Any:
        return real_domains(real_lookup(base)[1] if spec.name == THROWAWAY else spec, *args)

    monkeypatch.setattr(testing, "_lookup", lookup)
    monkeypatch.setattr(testing, "index_domains", domains)
    return [THROWAWAY, *ops]


def _without(doc: bytes, op: str) -> list[Any]:
    return [c for c in json.loads(doc)["cases"] if c["op"] != op]


def test_adding_a_kernel_changes_no_other_kernels_fixtures(throwaway_kernel: list[str]) -> None:
    before = GENERATE.compute(throwaway_kernel[1:])
    after = GENERATE.compute(throwaway_kernel)
    added = sorted(set(after) - set(before))
    assert added and all(name.startswith(f"{THROWAWAY}_") for name in added), added
    assert set(before) <= set(after), sorted(set(before) - set(after))
    changed = sorted(name for name in before if name != "cases.json" and before[name] != after[name])
    assert not changed, f"adding {THROWAWAY} changed other kernels' fixtures: {changed}"
    assert _without(before["cases.json"], THROWAWAY) == _without(after["cases.json"], THROWAWAY)


def test_each_kernels_cases_do_not_depend_on_the_others() -> None:
    every = GENERATE.build_cases()
    for op in sorted({c.op for c in every}):
        assert GENERATE.build_cases([op]) == [c for c in every if c.op == op], op


def test_the_readme_states_the_budget_the_generator_enforces() -> None:
    readme = (Path(GENERATE.__file__).parent / "README.md").read_text(encoding="utf-8")
    assert f"{GENERATE.MAX_FIXTURE_BYTES:,} bytes".replace(",", " ") in readme
    assert f"more than {GENERATE.FULL_OUTPUT_LIMIT:,} elements".replace(",", " ") in readme

"""Which side a failure of nki-library's suite is on: torch-nki's (a gap in the simulator or
the frontend), nki-library's own (a defect in its published tree that fails on any simulator,
each listed with the evidence), or the machine's (the run's memory limit).

The upstream list names defects of aws-neuron/nki-library at d2ad3a5 (2026-04-13) by the cause
text the runner prints; docs/nki-library.md explains each. A newer checkout may have fixed them:
the runner then simply never sees those causes."""

from __future__ import annotations

import re

TORCH_NKI = "torch-nki"
UPSTREAM = "nki-library"
MEMORY = "memory limit"

UPSTREAM_DEFECTS: list[tuple[re.Pattern[str], str]] = [
    (
        re.compile(r"'PerRankLazyInputGenerator' object has no attribute 'items'"),
        "test/utils/simulation_setup.py calls kernel_input.items() on per-rank inputs: the "
        "collectives tests cannot run in simulation mode",
    ),
    (
        re.compile(r"KeyError: 'mask_out_hbm'"),
        "test_gen_mask_tkg.py's output descriptor reads kernel_input['mask_out_hbm'], but the "
        "input generator names it 'mask_out_hbm.must_alias_input'",
    ),
    (
        re.compile(r"IndentationError: unexpected indent"),
        "the test file does not parse",
    ),
    (
        re.compile(r"NameError: name 'Platforms' is not defined"),
        "the test file uses Platforms without importing it",
    ),
    (
        re.compile(r"No module named 'nkilib_src\.nkilib\.experimental\.subkernels'"),
        "the test imports a package the published tree does not have",
    ),
]
"""``(cause pattern, what is wrong upstream)`` for each known defect."""

_MEMORY = re.compile(r"MemoryError|Unable to allocate|can't allocate memory|Cannot allocate memory")


def is_memory(text: str) -> bool:
    """Whether ``text`` reports an allocation the run's memory limit refused."""
    return bool(_MEMORY.search(text))


def kind(cause: str) -> str:
    """Whose failure a cause is: :data:`UPSTREAM`, :data:`MEMORY` or :data:`TORCH_NKI`."""
    if any(pattern.search(cause) for pattern, _ in UPSTREAM_DEFECTS):
        return UPSTREAM
    if is_memory(cause):
        return MEMORY
    return TORCH_NKI

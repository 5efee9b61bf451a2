"""Costing scales with the work, not faster: torch_nki.cost("add") on a [2^20, 2^16] meta tensor
(a million instructions: 2^28 bytes per row tile, 32 column chunks) finishes within 30 s, and
doubling the rows at most about doubles the time. (frontend_scaling.py holds the NKI Python
frontend to the same: a 10^6-iteration loop.)"""
# timeout: 90

import time

import torch

import torch_nki


def seconds(rows: int) -> float:
    x = torch.empty(rows, 2**16, device="meta")
    start = time.perf_counter()
    report = torch_nki.cost("add", x, x)
    # Every core of the launch takes its share of the row tiles; the report is the slowest core's.
    assert report.instructions * report.cores == rows // 128 * 32 * 4, report.instructions
    return time.perf_counter() - start


small, large = seconds(2**15), seconds(2**16)
assert large < 3.0 * small + 0.5, f"2^15 rows: {small:.2f} s, 2^16 rows: {large:.2f} s"
big = seconds(2**20)
assert big < 30.0, f"[2^20, 2^16]: {big:.1f} s"
print(f"[2^15, 2^16]: {small:.2f} s, [2^16, 2^16]: {large:.2f} s, [2^20, 2^16]: {big:.1f} s")
print("OK")

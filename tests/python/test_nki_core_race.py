"""``core-race``: program instances of a launch grid run at the same time on the device, so two
instances writing one element of a shared HBM tensor, or one reading what another writes, with
no synchronisation between, is a ValidationError naming both instructions and lines."""

from __future__ import annotations

import numpy as np
import pytest

import torch_nki.nki.isa as nisa
import torch_nki.nki.language as nl
from torch_nki import nki
from torch_nki.errors import ValidationError, ValidationWarning


@nki.jit(target="trn2")
def own_rows(x):
    """Each instance copies its own rows: no race."""
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    rows = x.shape[0] // nl.num_programs(0)
    first = nl.program_id(0) * rows
    nl.store(out[first : first + rows, :], value=nl.load(x[first : first + rows, :]))
    return out


@nki.jit(target="trn2")
def both_write_row_zero(x):
    """Each instance copies its rows, and both also write row 0."""
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    rows = x.shape[0] // nl.num_programs(0)
    first = nl.program_id(0) * rows
    t = nl.load(x[first : first + rows, :])
    nl.store(out[first : first + rows, :], value=t)
    nl.store(out[0:1, :], value=t[0:1, :])
    return out


@nki.jit(target="trn2")
def reads_the_other_half(x):
    """Instance 1 reads what instance 0 writes, before (or without) a barrier."""
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    if nl.program_id(0) == 0:
        nl.store(out[0:1, :], value=nl.load(x[0:1, :]))
    else:
        copied = nl.load(out[0:1, :])
        nl.store(out[1:2, :], value=copied)
    return out


@nki.jit(target="trn2")
def reads_the_other_half_after_a_barrier(x):
    """The same exchange through HBM, ordered by a core_barrier: no race."""
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    if nl.program_id(0) == 0:
        nl.store(out[0:1, :], value=nl.load(x[0:1, :]))
    nisa.core_barrier(data=out, cores=(0, 1))
    if nl.program_id(0) == 1:
        nl.store(out[1:2, :], value=nl.load(out[0:1, :]))
    return out


@nki.jit(target="trn2")
def split_rows_and_replicated_sum(x):
    """Each instance copies its own rows, and every instance stores the same row sums (work not
    split, as nki-library's kernels leave some): the same stores from the same line."""
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    sums = nl.ndarray((x.shape[0], 1), dtype=x.dtype, buffer=nl.shared_hbm)
    rows = x.shape[0] // nl.num_programs(0)
    first = nl.program_id(0) * rows
    nl.store(out[first : first + rows, :], value=nl.load(x[first : first + rows, :]))
    nl.store(sums, value=nl.sum(nl.load(x), axis=1, keepdims=True))
    return out, sums


@nki.jit(target="trn2")
def split_rows_and_shared_accumulate(x):
    """As above, but every instance adds ``x`` into the same output: a read-modify-write from both
    cores, a race whatever the values."""
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    total = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    rows = x.shape[0] // nl.num_programs(0)
    first = nl.program_id(0) * rows
    nl.store(out[first : first + rows, :], value=nl.load(x[first : first + rows, :]))
    nl.store(total, value=nl.load(x))
    nl.store(total, value=nl.add(nl.load(total), nl.load(x)))
    return out, total


@nki.jit(target="trn2")
def replicated_sum_read_back(x):
    """Every instance stores the same row sums (work not split), then reads them back for its
    own rows (nki-library's attention block writes V to HBM on both cores this way)."""
    sums = nl.ndarray((x.shape[0], 1), dtype=x.dtype, buffer=nl.shared_hbm)
    out = nl.ndarray((x.shape[0], 1), dtype=x.dtype, buffer=nl.shared_hbm)
    nl.store(sums, value=nl.sum(nl.load(x), axis=1, keepdims=True))
    rows = x.shape[0] // nl.num_programs(0)
    first = nl.program_id(0) * rows
    nl.store(out[first : first + rows, :], value=nl.load(sums[first : first + rows, :]))  # read back
    return sums, out


def test_the_same_stores_from_every_instance_are_a_warning() -> None:
    x = np.arange(16, dtype=np.float32).reshape(4, 4)
    with pytest.warns(ValidationWarning, match=r"every program instance stores the same elements of out1"):
        out, sums = split_rows_and_replicated_sum[2](x)
    np.testing.assert_array_equal(out, x)
    np.testing.assert_allclose(sums, x.sum(axis=1, keepdims=True))


def test_the_same_stores_read_back_by_each_instance_are_a_warning() -> None:
    x = np.arange(16, dtype=np.float32).reshape(4, 4)
    with pytest.warns(ValidationWarning, match=r"then reads back what it stored") as record:
        sums, out = replicated_sum_read_back[2](x)
    assert "# read back" not in str(record[0].message)
    np.testing.assert_allclose(out, x.sum(axis=1, keepdims=True))
    np.testing.assert_allclose(sums, out)


def test_a_read_modify_write_from_every_instance_races() -> None:
    with pytest.raises(ValidationError, match=r"\[core-race\].* of out1 "):
        split_rows_and_shared_accumulate[2](np.ones((4, 4), np.float32))


def test_instances_on_their_own_regions_do_not_race() -> None:
    x = np.arange(16, dtype=np.float32).reshape(4, 4)
    np.testing.assert_array_equal(own_rows[2](x), x)


def test_two_instances_writing_one_element_race() -> None:
    with pytest.raises(ValidationError) as caught:
        both_write_row_zero[2](np.ones((4, 4), np.float32))
    err = caught.value
    assert err.rule == "core-race"
    assert "program instance 0 writes element 0 of out0" in str(err)
    assert "instance 1 writes it" in str(err)
    line = both_write_row_zero.fn.__code__.co_firstlineno
    assert f"test_nki_core_race.py:{line + 7}" in str(err)


def test_reading_what_another_instance_writes_without_a_barrier_races() -> None:
    with pytest.raises(ValidationError, match=r"\[core-race\].*one instance reads what another writes"):
        reads_the_other_half[2](np.ones((2, 4), np.float32))


def test_a_barrier_between_the_write_and_the_read_orders_them() -> None:
    x = np.arange(8, dtype=np.float32).reshape(2, 4)
    got = reads_the_other_half_after_a_barrier[2](x)
    np.testing.assert_array_equal(got, np.stack([x[0], x[0]]))


def test_one_instance_alone_never_races() -> None:
    x = np.ones((4, 4), np.float32)
    np.testing.assert_array_equal(both_write_row_zero(x), x)

"""The two cores of a logical NeuronCore (LNC=2): ``nisa.core_barrier`` and ``nisa.sendrecv``
between the program instances of ``kernel[2]``, run in lockstep by the simulator."""

from __future__ import annotations

import inspect
import json

import numpy as np
import pytest

import torch_nki.nki.isa as nisa
import torch_nki.nki.language as nl
from torch_nki import nki
from torch_nki.errors import SimulationError, TraceError, ValidationError


@nki.jit(target="trn2")
def halves_then_swap(x):
    """Each core writes its half of a shared scratch tensor, both meet at a barrier, then each
    reads the other core's half: ``out[i] = x[1 - i]`` for the two halves."""
    rows = x.shape[0] // 2
    pid = nl.program_id(0)
    scratch = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    t = nl.load(x[pid * rows : (pid + 1) * rows, :])
    nl.store(scratch[pid * rows : (pid + 1) * rows, :], value=t)
    nisa.core_barrier(data=scratch, cores=(0, 1))
    other = 1 - pid
    u = nl.load(scratch[other * rows : (other + 1) * rows, :])
    nl.store(out[pid * rows : (pid + 1) * rows, :], value=u)
    return out


def test_a_barrier_orders_the_cores_writes_before_the_others_reads() -> None:
    x = np.arange(32, dtype=np.float32).reshape(8, 4)
    want = np.concatenate([x[4:], x[:4]])
    np.testing.assert_array_equal(halves_then_swap[2](x), want)


@nki.jit(target="trn2")
def exchange_max(x):
    """Each core takes the row maxima of its half, sends them to the other core and keeps the
    larger of the two: both halves of ``out`` hold the maxima over both halves."""
    rows = x.shape[0] // 2
    pid = nl.program_id(0)
    out = nl.ndarray((rows, 1), dtype=x.dtype, buffer=nl.shared_hbm)
    t = nl.load(x[pid * rows : (pid + 1) * rows, :])
    mine = nl.ndarray((rows, 1), dtype=x.dtype, buffer=nl.sbuf)
    nisa.tensor_reduce(dst=mine, op=nl.maximum, data=t, axis=1)
    theirs = nl.ndarray((rows, 1), dtype=x.dtype, buffer=nl.sbuf)
    nisa.sendrecv(src=mine, dst=theirs, send_to_rank=1 - pid, recv_from_rank=1 - pid, pipe_id=0)
    both = nl.ndarray((rows, 1), dtype=x.dtype, buffer=nl.sbuf)
    nisa.tensor_tensor(dst=both, data1=mine, data2=theirs, op=nl.maximum)
    if pid == 0:
        nl.store(out, value=both)
    return out


def test_sendrecv_swaps_tiles_between_the_cores() -> None:
    x = np.random.default_rng(3).standard_normal((8, 5)).astype(np.float32)
    want = np.maximum(x[:4].max(axis=1), x[4:].max(axis=1))[:, None]
    np.testing.assert_array_equal(exchange_max[2](x), want)


@nki.jit(target="trn2")
def doubling_exchanges(x):
    """Each core starts from its half of ``x`` and, three times, adds what the other core
    sends: a sendrecv inside a loop. Both cores end with ``4 · (top + bottom)``."""
    rows = x.shape[0] // 2
    pid = nl.program_id(0)
    out = nl.ndarray((rows, x.shape[1]), dtype=x.dtype, buffer=nl.shared_hbm)
    acc = nl.ndarray((rows, x.shape[1]), dtype=x.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=acc, src=x[pid * rows : (pid + 1) * rows, :])
    for _ in nl.sequential_range(3):
        theirs = nl.ndarray((rows, x.shape[1]), dtype=x.dtype, buffer=nl.sbuf)
        nisa.sendrecv(src=acc, dst=theirs, send_to_rank=1 - pid, recv_from_rank=1 - pid, pipe_id=0)
        nisa.tensor_tensor(dst=acc, data1=acc, data2=theirs, op=nl.add)
    if pid == 0:
        nl.store(out, value=acc)
    return out


@nki.jit(target="trn2")
def rounds_through_hbm(x):
    """Each round, each core publishes its running sum in a shared tensor, meets the other at a
    barrier, adds the other's, and meets it again before the next round overwrites: barriers
    inside a loop."""
    rows = x.shape[0] // 2
    pid = nl.program_id(0)
    scratch = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    acc = nl.ndarray((rows, x.shape[1]), dtype=x.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=acc, src=x[pid * rows : (pid + 1) * rows, :])
    other = 1 - pid
    for _ in nl.sequential_range(2):
        nl.store(scratch[pid * rows : (pid + 1) * rows, :], value=acc)
        nisa.core_barrier(data=scratch, cores=(0, 1))
        theirs = nl.load(scratch[other * rows : (other + 1) * rows, :])
        nisa.tensor_tensor(dst=acc, data1=acc, data2=theirs, op=nl.add)
        nisa.core_barrier(data=scratch, cores=(0, 1))
    nl.store(out[pid * rows : (pid + 1) * rows, :], value=acc)
    return out


def test_synchronisations_inside_loops_meet_once_per_iteration() -> None:
    x = np.arange(24, dtype=np.float32).reshape(6, 4)
    both = x[:3] + x[3:]
    np.testing.assert_array_equal(doubling_exchanges[2](x), 4 * both)
    np.testing.assert_array_equal(rounds_through_hbm[2](x), np.concatenate([2 * both, 2 * both]))


def test_a_race_between_iterations_of_a_synchronising_loop_is_an_error() -> None:
    @nki.jit(target="trn2")
    def one_barrier_per_round(x):
        rows = x.shape[0] // 2
        pid = nl.program_id(0)
        scratch = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
        out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
        acc = nl.ndarray((rows, x.shape[1]), dtype=x.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=acc, src=x[pid * rows : (pid + 1) * rows, :])
        for _ in nl.sequential_range(2):
            nl.store(scratch[pid * rows : (pid + 1) * rows, :], value=acc)
            nisa.core_barrier(data=scratch, cores=(0, 1))
            theirs = nl.load(scratch[(1 - pid) * rows : (2 - pid) * rows, :])
            nisa.tensor_tensor(dst=acc, data1=acc, data2=theirs, op=nl.add)
        nl.store(out[pid * rows : (pid + 1) * rows, :], value=acc)
        return out

    # Without the second barrier, one core's store of round 2 races the other's load of round 1.
    with pytest.raises(ValidationError, match=r"\[core-race\].*instances 0 and 1"):
        one_barrier_per_round[2](np.zeros((6, 4), np.float32))


def test_a_core_that_never_reaches_the_barrier_is_a_simulation_error() -> None:
    @nki.jit(target="trn2")
    def lonely(x):
        out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
        row = nl.program_id(0)
        nl.store(out[row : row + 1, :], value=nl.load(x[row : row + 1, :]))
        if nl.program_id(0) == 0:
            nisa.core_barrier(data=out, cores=(0, 1))
        return out

    with pytest.raises(
        SimulationError, match=r"core_barrier across the cores .*core 1 finished without reaching it"
    ):
        lonely[2](np.zeros((2, 2), np.float32))


def test_mismatched_exchanges_and_single_core_sends_are_errors() -> None:
    @nki.jit(target="trn2")
    def self_send(x):
        out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
        t = nl.load(x)
        u = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.sbuf)
        nisa.sendrecv(src=t, dst=u, send_to_rank=nl.program_id(0), recv_from_rank=0, pipe_id=0)
        # Each core stores its own rows: two cores writing one row would race.
        rows = x.shape[0] // nl.num_programs(0)
        first = nl.program_id(0) * rows
        nl.store(out[first : first + rows, :], value=u[first : first + rows, :])
        return out

    with pytest.raises(SimulationError, match=r"core 1 receives from core 0, but core 0 sends to core 0"):
        self_send[2](np.zeros((2, 2), np.float32))
    # One core sending to itself is a copy.
    x = np.arange(4, dtype=np.float32).reshape(2, 2)
    np.testing.assert_array_equal(self_send(x), x)
    with pytest.raises(
        SimulationError, match=r"this program runs on one core: launch the kernel on the two cores"
    ):
        exchange_max(np.zeros((4, 2), np.float32))
    with pytest.raises(
        TraceError, match=r"send_to_rank and recv_from_rank are cores of the logical NeuronCore, 0 or 1"
    ):
        exchange_max.fn  # noqa: B018
        nki.jit(self_send.fn, target="trn2")[3](np.zeros((2, 2), np.float32))


def test_barriers_and_exchanges_emit_and_trace_back() -> None:
    x = np.arange(32, dtype=np.float32).reshape(8, 4)
    program = halves_then_swap[2].trace(x)
    source = program.emit()
    assert "nisa.core_barrier(data=" in source and "cores=(0, 1)" in source
    module = nki.load_source(source, "halves_then_swap")
    again = module.halves_then_swap[module.LAUNCH_GRID].trace(x)
    assert again.difference(program) is None
    np.testing.assert_array_equal(module.halves_then_swap[module.LAUNCH_GRID](x), halves_then_swap[2](x))
    program = exchange_max[2].trace(x)
    assert "send_to_rank=0, recv_from_rank=0, pipe_id=0" in program.emit()
    text, _, _ = program.cost()
    assert "send_recv" in program.to_json() and text


def test_a_synchronisation_fences_its_core_in_the_cost_model() -> None:
    """On each core nothing after a barrier starts before the barrier ends, and the barrier
    starts once everything before it is done: each round's load of the other core's half comes
    after that round's first barrier."""
    x = np.arange(24, dtype=np.float32).reshape(6, 4)
    _, _, trace = rounds_through_hbm[2].trace(x).cost()
    events = [e for e in json.loads(trace)["traceEvents"] if e.get("ph") == "X"]
    events.sort(key=lambda e: e["ts"])
    source, first = inspect.getsourcelines(rounds_through_hbm.fn)
    line: dict[str, int] = {}
    for k, text in enumerate(source):
        line.setdefault(text.strip().split("(")[0], first + k)  # the first of each
    barrier_line, load_line = line["nisa.core_barrier"], line["theirs = nl.load"]

    def at(e: dict[str, object]) -> int:
        return int(str(e["args"]["loc"]).rsplit(":", 1)[1])  # type: ignore[index]

    barriers = [e for e in events if e["name"] == "core_barrier"]
    loads = [e for e in events if at(e) == load_line]
    assert len(barriers) == 4 and len(loads) == 2  # the core the trace shows, two rounds
    first_barriers = [e for e in barriers if at(e) == barrier_line]
    for barrier, load in zip(first_barriers, loads, strict=True):
        assert load["ts"] >= barrier["ts"] + barrier["dur"] - 1e-9
    for barrier in barriers:
        assert all(e["ts"] + e["dur"] <= barrier["ts"] + 1e-9 for e in events if e["ts"] < barrier["ts"])
        assert all(
            e["ts"] >= barrier["ts"] + barrier["dur"] - 1e-9 for e in events if e["ts"] > barrier["ts"]
        )

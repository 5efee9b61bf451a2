"""The random-number instructions and ``nl.random_seed`` / ``nl.rand`` / ``nl.dropout`` through
the frontend, against a Python reference of the documented generator (XORWOW per compute lane,
SplitMix64 seeding from the default seed 0, four generators per vector lane used by element
``f mod 4``): the exact uint8 / uint16 bit streams, seeding, state set and read back, uniform
floats, dropout, a loop read in program order, the emit-and-trace-back round trip, and the
errors of bad input."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
import torch

import torch_nki.nki.isa as nisa
import torch_nki.nki.language as nl
from torch_nki import nki
from torch_nki.errors import SimulationError, TraceError, ValidationError

from refs import nki_round_trip

M32 = 0xFFFFFFFF
M64 = 0xFFFFFFFFFFFFFFFF


def _xorwow(s: list[int]) -> int:
    """One step of ``s`` (``x, y, z, w, v, d``, changed in place): the next 32 bits."""
    x, y, z, w, v, d = s
    t = x ^ (x >> 2)
    v2 = (v ^ (v << 4) ^ t ^ (t << 1)) & M32
    d2 = (d + 362437) & M32
    s[:] = [y, z, w, v, v2, d2]
    return (d2 + v2) & M32


def _seed_words(seed: int, engine: int, lane: int, n: int) -> list[int]:
    z = ((seed & M32) << 32) | (engine << 16) | lane
    out = []
    for _ in range(n):
        z = (z + 0x9E3779B97F4A7C15) & M64
        x = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & M64
        x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & M64
        out.append((x ^ (x >> 31)) >> 32)
    return out


class Engines:
    """The reference engines from the documented default (both from seed 0)."""

    def __init__(self) -> None:
        self.gpsimd = [_seed_words(0, 1, p, 6) for p in range(128)]
        self.vector: list[list[list[int]]] = []
        self.seed(0)

    def seed(self, seed: int) -> None:
        words = [_seed_words(seed, 0, p, 24) for p in range(128)]
        self.vector = [[w[6 * g : 6 * g + 6] for g in range(4)] for w in words]

    def draws(self, engine: str, np_: int, nf: int) -> np.ndarray:
        out = np.zeros((np_, nf), dtype=np.uint64)
        for p in range(np_):
            for f in range(nf):
                state = self.vector[p][f % 4] if engine == "vector" else self.gpsimd[p]
                out[p, f] = _xorwow(state)
        return out


def _unit(bits: np.ndarray) -> np.ndarray:
    return (bits >> 8).astype(np.float32) * np.float32(2.0**-24)


@nki.jit
def bit_streams():
    """uint16 from the vector engine, then uint8 and int8 from GpSimd, then uint16 again."""
    outs = []
    for dtype, engine, shape in [
        (nl.uint16, nisa.engine.vector, (128, 8)),
        (nl.uint8, nisa.engine.gpsimd, (64, 5)),
        (nl.int8, nisa.engine.gpsimd, (64, 5)),
        (nl.uint16, nisa.engine.vector, (128, 8)),
    ]:
        out = nl.ndarray(shape, dtype=dtype, buffer=nl.shared_hbm)
        t = nl.ndarray(shape, dtype=dtype, buffer=nl.sbuf)
        nisa.rng(dst=t, engine=engine)
        nl.store(out, value=t)
        outs.append(out)
    return tuple(outs)


def test_rng_writes_the_low_bits_of_the_lanes_xorwow_streams() -> None:
    got = bit_streams()
    e = Engines()
    np.testing.assert_array_equal(got[0], (e.draws("vector", 128, 8) & 0xFFFF).astype(np.uint16))
    np.testing.assert_array_equal(got[1], (e.draws("gpsimd", 64, 5) & 0xFF).astype(np.uint8))
    np.testing.assert_array_equal(got[2], (e.draws("gpsimd", 64, 5) & 0xFF).astype(np.uint8).view(np.int8))
    np.testing.assert_array_equal(got[3], (e.draws("vector", 128, 8) & 0xFFFF).astype(np.uint16))
    # The same kernel gives the same bits on every run.
    for again, first in zip(bit_streams(), got, strict=True):
        np.testing.assert_array_equal(again, first)


def _seeded_rand(seed: int, again: int):
    """``nl.rand`` after ``nl.random_seed(seed)``, then after ``nl.random_seed(again)``."""

    def kernel():
        out = nl.ndarray((128, 96), dtype=nl.float32, buffer=nl.shared_hbm)
        nl.random_seed(nl.full((1, 1), seed, dtype=nl.int32, buffer=nl.sbuf))
        a = nl.rand((128, 48), dtype=nl.float32)
        nl.random_seed(nl.full((1, 1), again, dtype=nl.int32, buffer=nl.sbuf))
        b = nl.rand((128, 48), dtype=nl.float32)
        nl.store(out[:, 0:48], value=a)
        nl.store(out[:, 48:96], value=b)
        return out

    return kernel


@pytest.mark.parametrize("target", ["trn1", "trn2", "trn3"])
def test_rand_lowers_per_target_and_random_seed_reaches_it_where_nki_says(target: str) -> None:
    got = nki.jit(_seeded_rand(42, 42), target=target)()
    other = nki.jit(_seeded_rand(42, 7), target=target)()
    assert ((got >= 0) & (got < 1)).all()
    assert abs(float(got.mean()) - 0.5) < 0.05
    e = Engines()
    if target == "trn3":
        # rand2(0, 1) on the vector engine: the top 24 bits scaled by 2^-24; the seed restarts it.
        e.seed(42)
        want = _unit(e.draws("vector", 128, 48))
        np.testing.assert_array_equal(got[:, :48], want)
        np.testing.assert_array_equal(got[:, 48:], want)
        assert not np.array_equal(other[:, 48:], want)
    elif target == "trn1":
        # rng on the vector engine (the only engine it has there): 16 bits scaled by 2^-16.
        e.seed(42)
        want = (e.draws("vector", 128, 48) & 0xFFFF).astype(np.float32) / 65536
        np.testing.assert_array_equal(got[:, :48], want)
        np.testing.assert_array_equal(got[:, 48:], want)
    else:
        # rng on GpSimd: nl.random_seed does not reach it (NKI's release notes warn of this).
        first = (e.draws("gpsimd", 128, 48) & 0xFFFF).astype(np.float32) / 65536
        second = (e.draws("gpsimd", 128, 48) & 0xFFFF).astype(np.float32) / 65536
        np.testing.assert_array_equal(got, np.concatenate([first, second], axis=1))
        np.testing.assert_array_equal(other, got)


@nki.jit(target="trn3")
def state_round_trip(state):
    """The GpSimd lanes set from ``state`` (64 lanes), read back, drawn from, read back."""
    back = nl.ndarray((64, 6), dtype=nl.uint32, buffer=nl.shared_hbm)
    bits = nl.ndarray((64, 10), dtype=nl.uint16, buffer=nl.shared_hbm)
    after = nl.ndarray((64, 6), dtype=nl.uint32, buffer=nl.shared_hbm)
    s = nl.load(state)
    nisa.rand_set_state(src_seeds=s, engine=nisa.engine.gpsimd)
    t = nl.ndarray((64, 6), dtype=nl.uint32, buffer=nl.sbuf)
    nisa.rand_get_state(dst=t, engine=nisa.engine.gpsimd)
    nl.store(back, value=t)
    b = nl.ndarray((64, 10), dtype=nl.uint16, buffer=nl.sbuf)
    nisa.rng(dst=b, engine=nisa.engine.gpsimd)
    nl.store(bits, value=b)
    t2 = nl.ndarray((64, 6), dtype=nl.uint32, buffer=nl.sbuf)
    nisa.rand_get_state(dst=t2, engine=nisa.engine.gpsimd)
    nl.store(after, value=t2)
    return back, bits, after


def test_rand_set_state_sets_the_lanes_and_get_state_reads_them_as_fp32_holds_them() -> None:
    state = np.random.default_rng(3).integers(0, 2**24, (64, 6)).astype(np.uint32)
    back, bits, after = state_round_trip(state)
    np.testing.assert_array_equal(back, state)
    e = Engines()
    for p in range(64):
        e.gpsimd[p] = [int(w) for w in state[p]]
    np.testing.assert_array_equal(bits, (e.draws("gpsimd", 64, 10) & 0xFFFF).astype(np.uint16))
    # Words of 2^24 or more come back as their nearest fp32 (the documented deviation).
    exact = np.array(e.gpsimd[:64], dtype=np.uint64)
    np.testing.assert_array_equal(after, exact.astype(np.float32).astype(np.uint32))
    assert (after.astype(np.uint64) != exact).any()


@nki.jit
def dropped(x, rate):
    """``nisa.dropout`` with 0.4, then ``nl.dropout`` with the per-partition ``rate`` into
    bfloat16."""
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    out2 = nl.ndarray(x.shape, dtype=nl.bfloat16, buffer=nl.shared_hbm)
    t = nl.load(x)
    d = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.sbuf)
    nisa.dropout(dst=d, data=t, prob=0.4)
    nl.store(out, value=d)
    nl.store(out2, value=nl.dropout(t, rate=nl.load(rate), dtype=nl.bfloat16))
    return out, out2


def test_dropout_zeroes_where_the_vector_draw_is_below_the_probability() -> None:
    x = np.random.default_rng(1).uniform(1, 2, (128, 64)).astype(np.float32)
    rate = np.linspace(0, 1, 128, dtype=np.float32).reshape(128, 1)
    a_t, b_t = dropped(torch.from_numpy(x), torch.from_numpy(rate))
    a, b = a_t.numpy(), b_t.float().numpy()
    e = Engines()
    np.testing.assert_array_equal(a, np.where(_unit(e.draws("vector", 128, 64)) < 0.4, 0, x))
    assert abs(float((a == 0).mean()) - 0.4) < 0.03
    want = np.where(_unit(e.draws("vector", 128, 64)) < rate, 0, x)
    np.testing.assert_array_equal(b, _to_bf16(want))
    assert (b[0] != 0).all() and (b[127] == 0).all()


def _to_bf16(v: np.ndarray) -> np.ndarray:
    return torch.from_numpy(v).to(torch.bfloat16).float().numpy()


def _looped(loop: Any):
    def kernel():
        out = nl.ndarray((128, 32), dtype=nl.uint16, buffer=nl.shared_hbm)
        for i in loop(4):
            t = nl.ndarray((128, 8), dtype=nl.uint16, buffer=nl.sbuf)
            nisa.rng(dst=t)
            nl.store(out[:, i * 8 : (i + 1) * 8], value=t)
        return out

    return kernel


def test_a_loop_draws_in_the_program_order_of_its_sequential_reading() -> None:
    got = nki.jit(_looped(nl.affine_range))()
    np.testing.assert_array_equal(got, nki.jit(_looped(nl.sequential_range))())
    e = Engines()
    want = np.concatenate([e.draws("vector", 128, 8) & 0xFFFF for _ in range(4)], axis=1)
    np.testing.assert_array_equal(got, want.astype(np.uint16))


@nki.jit
def every_instruction(state, x):
    """Each random-number instruction once, on NeuronCore-v4."""
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    s = nl.load(state)
    nisa.rand_set_state(src_seeds=s, engine=nisa.engine.vector)
    g = nl.ndarray(state.shape, dtype=nl.uint32, buffer=nl.sbuf)
    nisa.rand_get_state(dst=g, engine=nisa.engine.vector)
    nisa.set_rng_seed(src_seeds=nl.full((1, 1), 5, dtype=nl.int32, buffer=nl.sbuf))
    bits = nl.ndarray(x.shape, dtype=nl.uint8, buffer=nl.sbuf)
    nisa.rng(dst=bits, engine=nisa.engine.gpsimd)
    u = nl.ndarray(x.shape, dtype=nl.float32, buffer=nl.sbuf)
    nisa.rand2(dst=u, min=-1.0, max=1.0)
    d = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.sbuf)
    nisa.dropout(dst=d, data=nl.load(x), prob=0.5)
    nl.store(out, value=d)
    return out


def test_the_random_instructions_emit_and_trace_back() -> None:
    state = np.zeros((128, 24), dtype=np.uint32)
    source = nki_round_trip(every_instruction, state, np.ones((128, 16), np.float32), target="trn3")
    for call in [
        "nisa.rand_set_state(src_seeds=t0, engine=nisa.engine.vector)",
        "nisa.rand_get_state(dst=t1, engine=nisa.engine.vector)",
        "nisa.rng(dst=t3, engine=nisa.engine.gpsimd)",
        "nisa.rand2(dst=t4, min=-1.0, max=1.0)",
        "nisa.dropout(dst=t5, data=t6, prob=0.5)",
    ]:
        assert call in source, source
    assert "nisa.set_rng_seed(src_seeds=t2)" in source


def _one(body: Any, target: str = "trn2") -> Any:
    def kernel():
        out = nl.ndarray((4, 4), dtype=nl.float32, buffer=nl.shared_hbm)
        body()
        t = nl.ndarray((4, 4), dtype=nl.float32, buffer=nl.sbuf)
        nisa.memset(dst=t, value=0.0)
        nl.store(out, value=t)
        return out

    return nki.jit(kernel, target=target)


def _tile(dtype: Any, shape: tuple[int, int] = (4, 4), buffer: Any = None) -> Any:
    return nl.ndarray(shape, dtype=dtype, buffer=buffer or nl.sbuf)


def test_bad_random_calls_name_the_instruction_and_the_argument() -> None:
    with pytest.raises(TypeError, match=r"nl.random_seed takes a \[1, 1\] int32/uint32 tile"):
        _one(lambda: nl.random_seed(42))()
    with pytest.raises(TraceError, match="rng: dst must be one of i8, i16, i32, u8, u16, u32, got f32"):
        _one(lambda: nisa.rng(dst=_tile(nl.float32)))()
    with pytest.raises(ValueError, match="engine must be one of"):
        _one(lambda: nisa.rng(dst=_tile(nl.uint8), engine=nisa.engine.scalar))()
    with pytest.raises(TraceError, match="rand_set_state: src_seeds must hold 6 uint32 state words"):
        _one(lambda: nisa.rand_set_state(src_seeds=_tile(nl.uint32, (4, 24))))()
    with pytest.raises(TraceError, match=r"dropout: prob must be a probability in \[0, 1\], got 1.5"):
        _one(lambda: nisa.dropout(dst=_tile(nl.float32), data=_tile(nl.float32), prob=1.5))()
    with pytest.raises(TraceError, match="rand2: min must be below max, got min 2 and max 1"):
        _one(lambda: nisa.rand2(dst=_tile(nl.float32), min=2.0, max=1.0), "trn3")()
    with pytest.raises(ValidationError, match="rng on engine=gpsimd needs NeuronCore-v3"):
        _one(lambda: nisa.rng(dst=_tile(nl.uint8), engine=nisa.engine.gpsimd), "trn1")()
    with pytest.raises(ValidationError, match="rand_get_state on engine=vector needs NeuronCore-v4"):
        _one(lambda: nisa.rand_get_state(dst=_tile(nl.uint32, (4, 24)), engine=nisa.engine.vector))()
    with pytest.raises(ValidationError, match="rand2 needs NeuronCore-v4"):
        _one(lambda: nisa.rand2(dst=_tile(nl.float32), min=0.0, max=1.0))()
    with pytest.raises(ValidationError, match="GpSimd cannot access PSUM"):
        _one(lambda: nisa.rng(dst=_tile(nl.uint8, buffer=nl.psum), engine=nisa.engine.gpsimd))()
    with pytest.raises(SimulationError, match="rng into a u32 tile cannot be simulated exactly"):
        _one(lambda: nisa.rng(dst=_tile(nl.uint32)))()

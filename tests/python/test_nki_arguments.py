"""How ``@nki.jit`` kernels take their arguments: by keyword, arguments the kernel writes in
place (``nt.mutable_tensor``), and the NumPy-compatible ``nl`` dtypes."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import torch_nki.nki.isa as nisa
import torch_nki.nki.language as nl
from torch_nki import nki

ml_dtypes = pytest.importorskip("ml_dtypes")


@nki.jit
def accumulate(x, out, scale=1.0):
    """``out += x * scale`` in place; returns ``out``."""
    total = nl.add(nl.multiply(nl.load(x), scale), nl.load(out))
    nl.store(out, value=total)
    return out


@nki.jit
def copy_into(x, out):
    """Writes ``x`` into ``out`` and returns nothing."""
    nl.store(out, value=nl.load(x))


def test_arguments_bind_by_keyword_in_the_signatures_order() -> None:
    x = np.arange(32, dtype=np.float32).reshape(4, 8)
    out = np.ones((4, 8), np.float32)
    result = accumulate(out=out.copy(), scale=2.0, x=x)
    np.testing.assert_array_equal(result, 2 * x + 1)
    program = accumulate.trace(x, out, scale=2.0)
    assert [name for name, _, _ in program.inputs()] == ["x", "out"]


def test_a_written_argument_reads_its_old_contents_then_its_own_writes() -> None:
    x = np.full((4, 8), 3, np.float32)
    out = np.ones((4, 8), np.float32)
    result = accumulate(x, out)
    np.testing.assert_array_equal(result, np.full((4, 8), 4, np.float32))
    # The caller's array is updated in place, as on the device.
    np.testing.assert_array_equal(out, result)


def test_a_kernel_that_returns_nothing_still_updates_its_arguments() -> None:
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    out = np.zeros((2, 3), np.float32)
    assert copy_into(x, out) is None
    np.testing.assert_array_equal(out, x)
    tensor = torch.zeros(2, 3)
    copy_into(torch.from_numpy(x), tensor)
    torch.testing.assert_close(tensor, torch.from_numpy(x))


def test_a_read_only_array_is_left_alone_and_the_result_returned() -> None:
    x = np.full((2, 3), 5, np.float32)
    out = np.zeros((2, 3), np.float32)
    out.flags.writeable = False
    np.testing.assert_array_equal(accumulate(x, out), x)
    np.testing.assert_array_equal(out, 0)


def test_the_copy_on_write_is_one_dma_recorded_at_the_first_writes_line() -> None:
    program = accumulate.trace(np.ones((4, 8), np.float32), np.ones((4, 8), np.float32))
    text = program.emit()
    assert text.count("nisa.dma_copy") == 4  # the copy, two loads, the store
    assert len(program.outputs()) == 1


def test_bad_call_arguments_name_the_kernel() -> None:
    with pytest.raises(TypeError, match=r"nki kernel accumulate: .*missing a required argument: 'out'"):
        accumulate(np.ones((2, 2), np.float32))
    with pytest.raises(TypeError, match=r"nki kernel accumulate: .*unexpected keyword argument 'bogus'"):
        accumulate(np.ones((2, 2), np.float32), np.ones((2, 2), np.float32), bogus=1)


@pytest.mark.parametrize("dtype", nl.DTYPES, ids=lambda d: d.nki_name)
def test_every_nl_dtype_is_a_numpy_dtype(dtype: nki.dtype) -> None:
    array = np.zeros((2, 3), dtype=dtype)
    assert array.dtype == dtype
    assert dtype == array.dtype
    assert np.dtype(dtype).itemsize == dtype.itemsize
    assert [d for d in nl.DTYPES if d == dtype] == [dtype]


def test_nl_dtypes_match_numpy_and_ml_dtypes_by_name() -> None:
    assert nl.float32 == np.float32 and nl.int8 == np.int8 and nl.bool_ == np.bool_
    assert np.dtype(nl.bfloat16) == ml_dtypes.bfloat16
    assert np.dtype(nl.float8_e4m3fn) == ml_dtypes.float8_e4m3fn
    assert np.dtype(nl.float8_e4m3) == ml_dtypes.float8_e4m3  # IEEE-style: ±240, infinities
    assert np.dtype(nl.tfloat32) == np.float32
    assert np.dtype(nl.float8_e4m3fn_x4) == np.uint32 and np.dtype(nl.float4_e2m1fn_x4) == np.uint16
    assert nl.bfloat16 != nl.float16 and nl.float32 != "not a dtype" and nl.float32 != 1.0
    assert {nl.bfloat16: 1}[nl.bfloat16] == 1


@pytest.mark.parametrize("name", ["bfloat16", "float8_e4m3fn", "float8_e5m2", "float16"])
def test_numpy_arrays_of_narrow_floats_go_in_and_come_back(name: str) -> None:
    dtype = getattr(nl, name)

    @nki.jit
    def passthrough(x):
        out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
        nl.store(out, value=nl.load(x))
        return out

    x = np.linspace(-4, 4, 32, dtype=np.float32).reshape(4, 8).astype(dtype)
    y = passthrough(x)
    assert y.dtype == x.dtype
    np.testing.assert_array_equal(y.view(np.uint8), x.view(np.uint8))


def test_nl_dtypes_stay_themselves_in_configuration_objects() -> None:
    import copy
    import dataclasses
    import pickle

    @dataclasses.dataclass
    class Config:
        dtype: nki.dtype

    # asdict recurses into dataclasses; an nl dtype, like a NumPy dtype, is kept whole.
    assert dataclasses.asdict(Config(nl.bfloat16)) == {"dtype": nl.bfloat16}
    assert copy.deepcopy(nl.float32) is nl.float32
    assert pickle.loads(pickle.dumps(nl.bfloat16)) == nl.bfloat16
    with pytest.raises(AttributeError, match="immutable"):
        nl.float32.native = "bf16"  # type: ignore[misc]


def test_tile_sizes_come_from_the_declarations_for_the_kernels_target() -> None:
    from torch_nki.nki._spec import SPEC

    declared = {t["name"]: t["value"] for t in SPEC["tile_sizes"]}
    assert sorted(dir(nl.tile_size)) == sorted(declared)
    assert nl.tile_size.pmax == declared["pmax"]["fixed"]
    per_target = declared["total_available_sbuf_size"]["per_target"]
    seen = {}
    for target in ("trn1", "trn2", "trn3"):

        @nki.jit(target=target)
        def probe(x, target=target):
            seen[target] = nl.tile_size.total_available_sbuf_size
            out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
            nl.store(out, value=nl.load(x))
            return out

        probe(np.zeros((1, 1), np.float32))
        with nki.default_target(target):
            assert nl.tile_size.total_available_sbuf_size == seen[target]
    assert [seen[t] for t in ("trn1", "trn2", "trn3")] == per_target
    with pytest.raises(AttributeError, match=r"NKI 0\.7 has no tile_size\.bogus"):
        _ = nl.tile_size.bogus


def test_a_launched_kernel_takes_keywords_and_shares_its_written_arguments() -> None:
    @nki.jit
    def halves(x, out):
        """Each of two programs adds its half of ``x`` into ``out`` in place."""
        rows = x.shape[0] // nl.num_programs(0)
        start = nl.program_id(0) * rows
        total = nl.add(nl.load(x[start : start + rows, :]), nl.load(out[start : start + rows, :]))
        nl.store(out[start : start + rows, :], value=total)
        return out

    x = np.arange(32, dtype=np.float32).reshape(4, 8)
    out = np.ones((4, 8), np.float32)
    result = halves[2](out=out, x=x)
    np.testing.assert_array_equal(result, x + 1)
    np.testing.assert_array_equal(out, x + 1)


def test_a_kernel_may_return_an_argument_it_did_not_write() -> None:
    @nki.jit
    def passthrough(dummy, x):
        t = nl.load(x)
        u = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.sbuf)
        nisa.tensor_copy(dst=u, src=t)
        return dummy

    dummy = np.full((1,), 7, np.float32)
    np.testing.assert_array_equal(passthrough(dummy, np.ones((2, 2), np.float32)), dummy)
    np.testing.assert_array_equal(dummy, [7])


def test_a_launched_kernel_may_write_an_argument_from_one_program_only() -> None:
    @nki.jit
    def update_cache(x, cache):
        """Program 1 alone writes the cache (AWS's attention block updates its KV cache so);
        both return it, with a result of their own."""
        out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
        rows = x.shape[0] // nl.num_programs(0)
        start = nl.program_id(0) * rows
        nl.store(out[start : start + rows, :], value=nl.load(x[start : start + rows, :]))
        if nl.program_id(0) == 1:
            nl.store(cache[0:1, :], value=nl.load(x[0:1, :]))
        return out, cache

    x = np.arange(32, dtype=np.float32).reshape(4, 8)
    cache = np.zeros((2, 8), np.float32)
    out, new_cache = update_cache[2](x, cache)
    np.testing.assert_array_equal(out, x)
    np.testing.assert_array_equal(new_cache[0], x[0])
    np.testing.assert_array_equal(new_cache[1], 0)


def test_an_argument_one_core_writes_after_an_exchange_reads_as_passed_on_the_other() -> None:
    @nki.jit(target="trn2")
    def attend_then_update(cache, new):
        """AWS's attention block's order: each core reads its half of the cache, the cores
        exchange, then core 0 alone writes the cache. Core 1, traced after core 0's write,
        reads the cache before that write in time: it must see the cache as passed."""
        pid = nl.program_id(0)
        rows = cache.shape[0] // 2
        out = nl.ndarray(cache.shape, dtype=cache.dtype, buffer=nl.shared_hbm)
        mine = nl.load(cache[pid * rows : (pid + 1) * rows, :])
        theirs = nl.ndarray(mine.shape, dtype=mine.dtype, buffer=nl.sbuf)
        nisa.sendrecv(src=mine, dst=theirs, send_to_rank=1 - pid, recv_from_rank=1 - pid, pipe_id=0)
        nl.store(out[pid * rows : (pid + 1) * rows, :], value=mine)
        if pid == 0:
            nl.store(cache, value=nl.load(new))
        return out, cache

    cache = np.arange(32, dtype=np.float32).reshape(4, 8)
    new = np.full((4, 8), -1, np.float32)
    out, updated = attend_then_update[2](cache.copy(), new)
    np.testing.assert_array_equal(out, cache)
    np.testing.assert_array_equal(updated, new)


def test_a_kernel_may_return_a_reshaped_argument_it_did_not_write() -> None:
    @nki.jit
    def unsqueezed(x, cache):
        """Returns its output and the cache seen with a head dim (AWS's attention block
        returns its KV caches so, written or not)."""
        out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
        nl.store(out, value=nl.load(x))
        return out, cache.reshape((cache.shape[0], 1, cache.shape[1]))

    x = np.arange(8, dtype=np.float32).reshape(2, 4)
    cache = np.arange(6, dtype=np.float32).reshape(3, 2)
    out, same = unsqueezed(x, cache)
    np.testing.assert_array_equal(out, x)
    np.testing.assert_array_equal(same, cache.reshape(3, 1, 2))

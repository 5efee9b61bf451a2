"""``nl.ndarray(address=(partition_offset, free_offset))``: explicitly placed on-chip tiles (the
allocator of AWS's kernel library places every tile this way)."""

from __future__ import annotations

import numpy as np
import pytest

import torch_nki.nki.language as nl
from torch_nki import nki
from torch_nki.errors import ValidationError


def _placed(address: object, shape: tuple[int, ...] = (4, 8), buffer: object = nl.sbuf) -> object:
    @nki.jit
    def kernel(x):
        t = nl.ndarray(shape, dtype=nl.float32, buffer=buffer, address=address)
        out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
        t[...] = nl.load(x)
        nl.store(out, value=t)
        return out

    return kernel(np.arange(32, dtype=np.float32).reshape(4, 8))


def test_a_placed_tile_computes_as_any_other() -> None:
    np.testing.assert_array_equal(_placed((0, 4096)), np.arange(32, dtype=np.float32).reshape(4, 8))
    np.testing.assert_array_equal(_placed((124, 0)), np.arange(32, dtype=np.float32).reshape(4, 8))


@pytest.mark.parametrize(
    ("address", "error", "message"),
    [
        ((126, 0), ValueError, r"partitions 126\.\.130 run past the 128 partitions"),
        ((0, 10**7), ValueError, r"bytes 10000000\.\.10000032 of each partition run past the \d+ bytes"),
        ((0,), TypeError, r"expected \(partition_offset, free_offset\), two non-negative ints"),
        ((0, -4), TypeError, "two non-negative ints"),
        ((0, 1.5), TypeError, "two non-negative ints"),
    ],
)
def test_an_address_outside_the_buffer_is_an_error_at_its_line(
    address: object, error: type[Exception], message: str
) -> None:
    with pytest.raises(error, match=message) as info:
        _placed(address)
    assert "test_nki_addresses.py" in str(info.value)


def test_an_hbm_tensor_takes_no_address() -> None:
    with pytest.raises(ValueError, match=r"only an on-chip tile \(nl.sbuf, nl.psum\) takes an address"):
        _placed((0, 0), buffer=nl.shared_hbm)


def test_placed_tiles_are_left_out_of_the_capacity_rules_and_emitted_with_their_address() -> None:
    # Three live 96 KiB-per-partition tiles: more than SBUF holds if the compiler placed them,
    # but the author placed two at one address (the library's allocator reuses addresses).
    free = 96 * 1024 // 4

    def kernel_with(address: object) -> object:
        @nki.jit(target="trn2")
        def wide(x):
            a = nl.ndarray((4, free), dtype=nl.float32, buffer=nl.sbuf, address=address)
            b = nl.ndarray((4, free), dtype=nl.float32, buffer=nl.sbuf, address=address)
            c = nl.ndarray((4, free), dtype=nl.float32, buffer=nl.sbuf)
            out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
            a[...] = nl.load(x)
            b[...] = nl.load(x)
            c[...] = nl.add(a, b)
            nl.store(out, value=c)
            return out

        return wide

    x = np.ones((4, free), np.float32)
    np.testing.assert_array_equal(kernel_with((0, 0))(x), 2 * x)
    with pytest.raises(ValidationError, match=r"live SBUF tiles need") as info:
        kernel_with(None)(x)
    assert info.value.rule == "sbuf-capacity"
    program = kernel_with((0, 0)).trace(x)
    source = program.emit()
    assert source.count("buffer=nl.sbuf, address=(0, 0))") == 2
    again = nki.trace(nki.load_source(source, "wide").wide, x)
    assert again.difference(program) is None

"""``nl.ndarray(address=(partition_offset, free_offset))``: explicitly placed on-chip tiles (the
allocator of AWS's kernel library places every tile this way)."""

from __future__ import annotations

import numpy as np
import pytest

import torch_nki.nki.language as nl
from torch_nki import nki


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

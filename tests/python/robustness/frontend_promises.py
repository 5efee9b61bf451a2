"""The frontend's promises: an output never stored, or stored but for its last row, is a
TraceError at its allocation line; a negative or overflowing nl.ndarray shape and a negative
cache capacity are ValueErrors naming them."""

import numpy as np

import torch_nki
import torch_nki.nki.language as nl
from torch_nki import nki
from torch_nki.errors import TraceError


@nki.jit
def never_stores(x):
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    nl.load(x)
    return out


@nki.jit
def misses_the_last_row(x):
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    for i in nl.affine_range(x.shape[0] - 1):
        nl.store(out[i : i + 1, :], value=nl.load(x[i : i + 1, :]))
    return out


x = np.ones((4, 8), dtype=np.float32)
for kernel, missing in ((never_stores, "32 of 32"), (misses_the_last_row, "8 of 32")):
    try:
        nki.simulate(kernel)(x)
    except TraceError as err:
        assert f"is not fully written: {missing} elements" in str(err), err
    else:
        raise SystemExit(f"{kernel}: no TraceError")
for shape, message in (((4, -1), "has dimension -1"), ((2**64, 1), "has dimension 18446744073709551616")):

    @nki.jit
    def bad_shape(x, shape=shape):
        return nl.ndarray(shape, dtype=x.dtype, buffer=nl.shared_hbm)

    try:
        bad_shape(x)
    except ValueError as err:
        assert f"nl.ndarray: shape {shape!r} {message}" in str(err), err
    else:
        raise SystemExit(f"shape {shape}: no ValueError")
try:
    torch_nki.cache_capacity(-1)
except ValueError as err:
    assert "capacity must be at least 1" in str(err)
print("OK")

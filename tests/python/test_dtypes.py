"""The dtype table Python reads from Rust (the manifest's ``dtypes`` and ``host_dtypes``),
checked against torch itself and against the native check that consumes the names."""

from __future__ import annotations

import torch

from torch_nki import _dtypes, _native
from torch_nki.nki import language as nl


def test_each_kernel_dtype_is_the_torch_dtype_of_its_size_and_kind() -> None:
    assert _dtypes.KERNEL_DTYPES, "the manifest lists no dtypes"
    for d in _dtypes.KERNEL_DTYPES:
        assert nl.as_dtype(d.name).native == d.name
        if d.torch is None:
            # A dtype torch lacks (float8_e4m3, tfloat32) never crosses the torch boundary.
            assert d.torch_name is None and d.name not in _dtypes.RETURNED, d
            assert not hasattr(torch, d.nki), d
            continue
        assert torch.empty(0, dtype=d.torch).element_size() == d.itemsize, d
        assert d.torch.is_floating_point == d.is_float, d
        assert _dtypes.caller_name(d.torch) == d.name
        assert nl.as_dtype(d.torch).native == d.name
        assert nl.as_dtype(d.name).native == d.name
        assert _dtypes.RETURNED[d.name] is d.torch


def test_host_dtypes_are_wider_than_the_kernel_dtype_they_are_computed_in() -> None:
    for h in _dtypes.HOST_DTYPES:
        assert h.torch not in _dtypes.TORCH_TO_NKI, h
        assert h.torch.is_floating_point == h.compute.is_floating_point, h
        assert torch.empty(0, dtype=h.torch).element_size() > torch.empty(0, dtype=h.compute).element_size()
        name = _dtypes.caller_name(h.torch)
        if h.torch.is_floating_point:
            # Passed by its host name, accepted where its compute dtype is, and its outputs
            # come back under that name.
            assert _native.Signature("add", [[2], [2]], [name, name], []).outputs() == [((2,), name)]
            assert _dtypes.RETURNED[name] is h.torch
        else:
            # Indices keep torch's name (messages say `int64`) and are narrowed, not widened.
            assert name == str(h.torch).removeprefix("torch.")
            assert _dtypes.INDEX_DOWNCAST[h.torch] is h.compute

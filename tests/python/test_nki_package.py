"""The ``nki`` package surface of the frontend: the target a kernel traces for (``@nki.jit``
options and ``NEURON_PLATFORM_TARGET_OVERRIDE``, as NKI reads it), ``nki.dtype``, and the
modules ``as_nki`` provides under NKI's names."""

from __future__ import annotations

import sys

import numpy as np
import pytest

import torch_nki.nki.isa as nisa
import torch_nki.nki.language as nl
from torch_nki import nki


def _versioned() -> nki.Kernel:
    seen: list[str] = []

    @nki.jit(mode="auto")  # deprecated in NKI and ignored, as NKI does
    def versioned(x):
        seen.append(nisa.get_nc_version().name)
        out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
        nl.store(out, value=nl.load(x))
        return out

    versioned.seen = seen  # type: ignore[attr-defined]
    return versioned


def test_the_platform_override_variable_picks_the_target(monkeypatch: pytest.MonkeyPatch) -> None:
    kernel = _versioned()
    x = np.ones((2, 2), np.float32)
    kernel(x)
    for value, version in [("trn1", "gen2"), ("inf2", "gen2"), ("gen3", "gen3"), ("TRN3", "gen4")]:
        monkeypatch.setenv("NEURON_PLATFORM_TARGET_OVERRIDE", value)
        kernel(x)
        assert kernel.seen[-1] == version, value  # type: ignore[attr-defined]
    assert kernel.seen[0] == "gen3"  # type: ignore[attr-defined]
    # A pinned target and nki.default_target win over the variable.
    with nki.default_target("trn2"):
        kernel(x)
    assert kernel.seen[-1] == "gen3"  # type: ignore[attr-defined]
    monkeypatch.setenv("NEURON_PLATFORM_TARGET_OVERRIDE", "trn4")
    with pytest.raises(ValueError, match=r"NEURON_PLATFORM_TARGET_OVERRIDE='trn4' is not a platform"):
        kernel(x)


def test_platform_target_was_removed_from_nki_jit() -> None:
    with pytest.raises(TypeError, match=r"platform_target= was removed in NKI 0\.3"):

        @nki.jit(platform_target="trn3")
        def k(x):
            return x


def test_as_nki_provides_typing_and_dtype_under_nki_names() -> None:
    with nki.as_nki():
        import nki as imported  # type: ignore[import-not-found]
        import nki.typing as nt  # type: ignore[import-not-found]

        assert imported is nki and nt is nki.typing
        assert sys.modules["nki.typing"] is nki.typing
    assert "nki.typing" not in sys.modules
    assert isinstance(nl.float32, nki.dtype)

"""``neuronxcc``: the two legacy modules nki-library's tests import (see ../README.md)."""

import sys

from torch_nki.nki import typing as _typing
from torch_nki.nkilib_suite import _neuron_dtypes

sys.modules.update(
    {
        f"{__name__}.nki": sys.modules.get(f"{__name__}.nki") or type(sys)(f"{__name__}.nki"),
        f"{__name__}.nki.typing": _typing,
        f"{__name__}.starfish": type(sys)(f"{__name__}.starfish"),
        f"{__name__}.starfish.support": type(sys)(f"{__name__}.starfish.support"),
        f"{__name__}.starfish.support.dtype": _neuron_dtypes,
    }
)
for _name in ("nki", "starfish", "starfish.support"):
    sys.modules[f"{__name__}.{_name}"].__path__ = []
sys.modules[f"{__name__}.nki"].typing = _typing  # type: ignore[attr-defined]
sys.modules[f"{__name__}.starfish"].support = sys.modules[f"{__name__}.starfish.support"]  # type: ignore[attr-defined]
sys.modules[f"{__name__}.starfish.support"].dtype = _neuron_dtypes  # type: ignore[attr-defined]
nki = sys.modules[f"{__name__}.nki"]
starfish = sys.modules[f"{__name__}.starfish"]

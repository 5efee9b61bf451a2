"""The ``torch.backends`` entry point, importable before ``torch`` itself.

``import torch`` loads every ``torch.backends`` entry point (PyTorch >= 2.5), which imports
``torch_nki`` and calls :func:`_autoload`. That import registers every op, so the entry point itself
has nothing left to do. This module is imported first by ``torch_nki/__init__.py`` so that
``_autoload`` exists even when ``import torch_nki`` is what triggered ``import torch`` (and torch's
autoload then finds ``torch_nki`` half-initialised).
"""

from __future__ import annotations

import sys
import warnings


def _autoload() -> None:
    """Entry point of the ``torch.backends`` group: a no-op, importing ``torch_nki`` registers the ops.

    Set ``TORCH_DEVICE_BACKEND_AUTOLOAD=0`` to stop ``import torch`` from importing ``torch_nki``.
    """


def torch_is_initialising() -> bool:
    """Whether ``import torch`` is still running (i.e. we are being autoloaded by torch)."""
    torch = sys.modules.get("torch")
    spec = getattr(torch, "__spec__", None)
    return bool(getattr(spec, "_initializing", False))


def report_autoload_failure(err: BaseException) -> None:
    """Turns a registration failure during torch's autoload into a warning: ``import torch`` must
    never fail because of torch-nki. An explicit ``import torch_nki`` raises instead."""
    warnings.warn(
        f"torch_nki: registering torch.ops.neuron.* failed during torch's backend autoload "
        f"({type(err).__name__}: {err}); set TORCH_DEVICE_BACKEND_AUTOLOAD=0 to skip torch_nki",
        RuntimeWarning,
        stacklevel=2,
    )

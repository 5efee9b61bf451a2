"""Checks shared by the public extension points (``register_adapter``, ``register_pattern``):
the kernels a registration names must be registered ops."""

from __future__ import annotations

from typing import Any

from torch_nki import testing
from torch_nki.errors import UnknownOpError


def check_kernels(where: str, kernels: Any) -> None:
    """``kernels`` must be a non-empty tuple of the names of registered ops: a ``TypeError``
    otherwise, or an :class:`~torch_nki.errors.UnknownOpError` naming the unknown one; ``where``
    names the registration in the message."""
    if not kernels or not all(isinstance(k, str) for k in kernels):
        raise TypeError(f"{where}: kernels must be a non-empty tuple of op names, got {kernels!r}")
    for kernel in kernels:
        try:
            testing.op_spec(kernel)
        except UnknownOpError as err:
            raise UnknownOpError(f"{where}: kernel {kernel!r} is not a registered op ({err})") from err

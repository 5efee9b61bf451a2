"""``nki.collectives``: collective communication between ranks (NKI 0.7's ``nki.collectives``).

``ReplicaGroup`` exists so kernels that build replica groups import and trace; the collective
operations themselves run between NeuronCores of several devices, which the simulator does
not model yet: calling one raises ``NotImplementedError`` naming the call and its line."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from torch_nki.nki._trace import unsupported
from torch_nki.nki.language import NKIObject

OPERATIONS = (
    "all_reduce",
    "all_gather",
    "all_gather_v",
    "reduce_scatter",
    "all_to_all",
    "all_to_all_v",
    "collective_permute",
    "collective_permute_implicit",
    "collective_permute_implicit_reduce",
    "collective_permute_implicit_current_processing_rank_id",
    "rank_id",
)
"""The operations of the NKI 0.7 API stub ``nki/collectives/__init__.py``."""


@dataclass
class ReplicaGroup(NKIObject):
    """The ranks taking part in a collective operation: ``ReplicaGroup([[0, 1], [2, 3]])``,
    sub-groups that do not overlap."""

    groups: list[list[int]] = field(default_factory=list)


def __getattr__(name: str) -> Any:
    if name in OPERATIONS:

        def operation(*args: Any, **kwargs: Any) -> Any:
            raise unsupported(f"nki.collectives.{name}", "collectives between devices are not simulated yet")

        operation.__name__ = name
        return operation
    if name.startswith("__"):
        raise AttributeError(name)
    raise AttributeError(
        f"module 'nki.collectives' has no attribute '{name}' (NKI 0.7 has no nki.collectives.{name})"
    )

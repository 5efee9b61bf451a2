"""The device time of each ATen op event of a ``torch.profiler`` run, for the hotspot ranking.

Measured where torch reports it: on a host with a ``neuron`` device (TorchNeuron's
``PrivateUse1`` backend), the profiler records the device's kernels as ``PrivateUse1`` events
and each CPU op's ``self_device_time_total`` is the device time of the kernels it launched.
Elsewhere, estimated: the cost model's estimate of the kernel that takes the op (given by the
caller), else the roofline estimate (:mod:`torch_nki.roofline`). An op called by an op that has
an estimate of its own (``aten::addmm`` inside ``aten::linear``) is counted in its caller.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

import torch

from torch_nki import roofline

__all__ = ["DeviceTimes", "is_aten", "measures_neuron"]

NEURON = "neuron"


def is_aten(event: Any) -> bool:
    """Whether a profiler event is an ATen op called on the CPU side (not a device kernel)."""
    device = getattr(getattr(event, "device_type", None), "name", "CPU")
    return device == "CPU" and str(event.name).startswith("aten::")


def measures_neuron(events: Iterable[Any]) -> bool:
    """Whether the events carry device time of a ``neuron`` device: a ``PrivateUse1`` event
    recorded with ``use_device="neuron"`` (or while the ``PrivateUse1`` backend is named
    ``neuron``)."""
    backend = torch._C._get_privateuse1_backend_name()
    for event in events:
        if getattr(getattr(event, "device_type", None), "name", None) != "PrivateUse1":
            continue
        if getattr(event, "use_device", None) == NEURON or backend == NEURON:
            return True
    return False


class DeviceTimes:
    """Device time per ATen op event of one profile (see the module documentation)."""

    def __init__(
        self,
        events: Iterable[Any],
        kernel_us: Callable[[Any], float | None],
        target: str = "trn2",
    ) -> None:
        self.measured = measures_neuron(events)
        """Whether the times are measured on a ``neuron`` device."""
        self.target = target
        self._kernel_us = kernel_us
        self._own: dict[int, tuple[float | None, str, bool]] = {}

    def own(self, event: Any) -> tuple[float | None, str, bool]:
        """The event's own estimate, µs: ``(time, source, covers)``; ``covers`` says whether
        the ops it calls are counted in it (anything but a view)."""
        found = self._own.get(id(event))
        if found is None:
            kernel = self._kernel_us(event)
            if kernel is not None:
                found = (kernel, "cost model", True)
            else:
                est = roofline.estimate(event.name, roofline.args_of(event), self.target)
                found = (None, "", False) if est is None else (est.us, "roofline", est.family != "view")
            self._own[id(event)] = found
        return found

    def of(self, event: Any) -> tuple[float | None, str]:
        """The device time of one call (µs) and where it comes from: ``measured``, ``cost
        model``, ``roofline``, or ``in <op>`` (0, counted in the calling op)."""
        if self.measured:
            return float(event.self_device_time_total), "measured"
        parent = event.cpu_parent
        while parent is not None:
            if is_aten(parent) and self.own(parent)[2]:
                return 0.0, f"in {parent.name}"
            parent = parent.cpu_parent
        us, source, _ = self.own(event)
        return us, source

"""Kernels that write their arguments (NKI's ``nt.mutable_tensor``, the in-place outputs of
AWS's kernel library).

The Program IR keeps kernel inputs read-only. The first instruction that writes an argument
makes it copy-on-write: a ``shared_hbm`` output of the argument's shape and dtype is allocated,
one ``dma_copy`` copies the argument into it, and from then on every view of the argument
(those made earlier included) names that output. The kernel therefore reads what it wrote, and
what it read before the first write was the argument as passed.

The copy goes to the launch's prologue, the top of the program before every program instance,
not to where the first write is: under ``kernel[2]`` the instances are traced one after the
other, so when instance 0 writes an argument, instance 1 (traced after) reads the copy from its
start, and it must hold the argument by then. (At the first write, the copy would run in
instance 0's stream after a synchronisation that instance 1's earlier reads come before, and
those reads would see a tensor not yet written.) After the run the argument's
final contents are copied back into the caller's array (NumPy arrays and torch tensors are
updated in place, as on the device), and a kernel that returns the argument returns them.

The copy is one more DMA in the instruction stream (and in the cost estimate) than the device
runs; ``Kernel.trace`` records it with the line of the first write. It moves the argument over all
128 partitions when its element count allows (as ``[128, numel / 128]``), so the estimate
charges it as one full-bandwidth copy rather than a one-partition transfer."""

from __future__ import annotations

from typing import Any

from torch_nki.nki._trace import Trace, current, location
from torch_nki.nki._values import HbmTensor, HbmView

_PARTITIONS = 128
"""The partitions a whole-argument copy spreads over."""

WRITE_KINDS = frozenset({"tile_out", "tensor_out"})
"""The parameter kinds (of the instruction declarations) an instruction writes."""


def make_writable(value: Any, dma_copy: Any) -> None:
    """Makes every kernel argument ``value`` views (a view, or a list of them) copy-on-write
    before an instruction writes it; ``dma_copy`` is ``nisa.dma_copy``."""
    for view in value if isinstance(value, list | tuple) else (value,):
        if not isinstance(view, HbmView):
            continue
        tensor = view.tensor
        if isinstance(tensor, HbmTensor) and tensor.argument is not None and not tensor.written:
            _copy_on_write(current(), tensor, dma_copy)


def _copy_on_write(trace: Trace, tensor: HbmTensor, dma_copy: Any) -> None:
    file, line = location(3)
    # One copy for the whole launch, whichever program instance writes first.
    index = trace.native.launch_output(list(tensor.shape), tensor.dtype.native, file, line)
    copy = HbmTensor(index, tensor.name, tensor.shape, tensor.dtype, trace)
    numel = 1
    for n in tensor.shape:
        numel *= n
    trace.native.launch_prologue(True)
    try:
        if numel % _PARTITIONS == 0 and numel > _PARTITIONS:
            rows = (_PARTITIONS, numel // _PARTITIONS)
            dma_copy(dst=copy.reshape(rows), src=tensor.reshape(rows))
        else:
            dma_copy(dst=copy, src=tensor)
    finally:
        trace.native.launch_prologue(False)
    tensor.id = index
    tensor.written = True
    trace.written_inputs.append(tensor)


def write_back(argument: Any, result: Any) -> None:
    """Copies a written argument's final contents (``result``, an array of its shape and
    dtype) into the caller's ``argument``, when that is a writable NumPy array or a torch
    tensor; anything else is left as it was."""
    if hasattr(argument, "copy_") and hasattr(argument, "detach"):
        argument.copy_(result)
        return
    flags = getattr(argument, "flags", None)
    if flags is not None and flags.writeable:
        argument[...] = result

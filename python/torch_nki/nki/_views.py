"""The view algebra NKI tensors share, on and off chip: a view is an element ``offset`` and
``dims``, a ``(size, stride)`` pair per dimension, outermost first (element ``[i0, i1, ...]`` is
storage element ``offset + Σ ik·stride_k``), as the NKI docs' access patterns describe it.
Indexing with integers and step slices, reshapes that the strides allow, permutations and
broadcasts are pure arithmetic on these; nothing here knows tiles or HBM."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from torch_nki.nki._trace import unsupported, where

Dims = list[tuple[int, int]]
"""``[(size, stride), ...]``, outermost first."""


def row_major(shape: Sequence[int]) -> Dims:
    """The dims of a contiguous row-major array of ``shape``."""
    dims, stride = [], 1
    for s in reversed([int(s) for s in shape]):
        dims.append((s, stride))
        stride *= s
    return dims[::-1]


def is_dense(dims: Dims) -> bool:
    """Whether the dims walk one contiguous run in order (size-1 dims may have any stride)."""
    expect = 1
    for size, stride in reversed(dims):
        if size != 1 and stride != expect:
            return False
        expect *= size
    return True


def _index_error(what: str) -> IndexError:
    return IndexError(f"{what} ({where()})")


def normalise(key: Any, shape: Sequence[int], what: str) -> list[tuple[int, int, int] | int]:
    """Per dimension: ``(start, count, step)`` for a slice, the index for an integer (which
    drops the dimension). Missing trailing dimensions are whole; ``...`` fills the middle."""
    if not isinstance(key, tuple):
        key = (key,)
    if any(k is Ellipsis for k in key):
        at = key.index(Ellipsis)
        fill = len(shape) - (len(key) - 1)
        key = key[:at] + (slice(None),) * fill + key[at + 1 :]
    if len(key) > len(shape):
        raise _index_error(f"{what}: {len(key)} indices for {len(shape)} dimensions")
    out: list[tuple[int, int, int] | int] = []
    key = key + (slice(None),) * (len(shape) - len(key))
    for dim, (k, size) in enumerate(zip(key, shape, strict=True)):
        if isinstance(k, bool) or not isinstance(k, int | slice):
            raise unsupported(f"indexing with {type(k).__name__}", "indices are integers and slices")
        if isinstance(k, int):
            index = k + size if k < 0 else k
            if not 0 <= index < size:
                raise _index_error(f"{what}: index {k} is out of bounds for dimension {dim} of size {size}")
            out.append(index)
            continue
        step = 1 if k.step is None else k.step
        if not isinstance(step, int) or step < 1:
            raise ValueError(f"{what}: slice step must be a positive int, got {k.step!r} ({where()})")
        start = 0 if k.start is None else k.start
        stop = size if k.stop is None else k.stop
        start = start + size if start < 0 else start
        stop = stop + size if stop < 0 else stop
        if not 0 <= start <= stop <= size:
            raise _index_error(
                f"{what}: slice [{k.start}:{k.stop}] is out of bounds for dimension {dim} of size {size}"
            )
        out.append((start, len(range(start, stop, step)), step))
    return out


def index(offset: int, dims: Dims, parts: Sequence[tuple[int, int, int] | int]) -> tuple[int, Dims]:
    """The view ``parts`` (from [`normalise`]) select of ``(offset, dims)``."""
    out: Dims = []
    for (_, stride), k in zip(dims, parts, strict=True):
        if isinstance(k, int):
            offset += k * stride
        else:
            start, count, step = k
            offset += start * stride
            out.append((count, stride * step))
    return offset, out


def reshape(dims: Dims, shape: Sequence[int]) -> Dims | None:
    """``dims`` seen with ``shape`` (same element count) where the strides allow it without a
    copy (the rule ``torch.Tensor.view`` follows: each run of dims that step over each other
    exactly is one chunk, and the new dims must split chunks, never straddle two); ``None``
    where they do not."""
    shape = [int(s) for s in shape]
    sizes = [size for size, _ in dims]
    if math.prod(shape) != math.prod(sizes):
        return None
    if not dims:
        return [(s, 0) for s in shape]
    strides = [stride for _, stride in dims]
    out = [0] * len(shape)
    view_d = len(shape) - 1
    base = strides[-1]
    tensor_numel = view_numel = 1
    for d in range(len(dims) - 1, -1, -1):
        tensor_numel *= sizes[d]
        chunk_ends = d == 0 or (sizes[d - 1] != 1 and strides[d - 1] != tensor_numel * base)
        if not chunk_ends:
            continue
        while view_d >= 0 and (view_numel < tensor_numel or shape[view_d] == 1):
            out[view_d] = view_numel * base
            view_numel *= shape[view_d]
            view_d -= 1
        if view_numel != tensor_numel:
            return None
        if d > 0:
            base = strides[d - 1]
            tensor_numel = view_numel = 1
    if view_d != -1:
        return None
    return list(zip(shape, out, strict=True))


def broadcast(dims: Dims, shape: Sequence[int], what: str) -> Dims:
    """NumPy broadcasting of ``dims`` to ``shape``: new leading and size-1 dims get stride 0."""
    shape = [int(s) for s in shape]
    if len(shape) < len(dims):
        raise ValueError(
            f"{what}: cannot broadcast a {tuple(s for s, _ in dims)} view to {tuple(shape)} ({where()})"
        )
    padded = [(1, 0)] * (len(shape) - len(dims)) + list(dims)
    out: Dims = []
    for (size, stride), want in zip(padded, shape, strict=True):
        if size == want:
            out.append((size, stride))
        elif size == 1:
            out.append((want, 0))
        else:
            raise ValueError(
                f"{what}: cannot broadcast a {tuple(s for s, _ in dims)} view to {tuple(shape)} ({where()})"
            )
    return out


def permute(dims: Dims, order: Sequence[int], what: str) -> Dims:
    """``dims`` reordered: result dim ``k`` is ``dims[order[k]]``."""
    order = [int(d) for d in order]
    if sorted(order) != list(range(len(dims))):
        raise ValueError(
            f"{what}: {tuple(order)} is not a permutation of the {len(dims)} dimensions ({where()})"
        )
    return [dims[d] for d in order]


def pattern(entries: Sequence[Sequence[int]], what: str) -> Dims:
    """NKI's ``[[step, num], ...]`` access pattern as dims."""
    dims: Dims = []
    for entry in entries:
        if not isinstance(entry, list | tuple) or len(entry) != 2:
            raise ValueError(f"{what}: pattern entries are [step, num], got {entry!r} ({where()})")
        step, num = entry
        if not all(isinstance(v, int) and not isinstance(v, bool) for v in (step, num)) or num < 1:
            raise ValueError(
                f"{what}: pattern entry {list(entry)!r} needs an int step and a positive int num ({where()})"
            )
        dims.append((int(num), int(step)))
    if not dims:
        raise ValueError(f"{what}: an access pattern needs at least one [step, num] entry ({where()})")
    return dims

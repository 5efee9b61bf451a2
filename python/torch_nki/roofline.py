"""Roofline estimates of ATen ops on a NeuronCore, for the ops no kernel of the registry takes.

An op's estimated device time is the larger of its compute time and its memory time at the
target's peak rates (one logical NeuronCore as the compiler configures it by default: both
physical cores of LNC=2 on Trn2/Trn3, as the library's kernels use them; each core's rates are
the cost model's table, read through ``torch_nki._native.peaks``)::

    time = max(FLOPs / tensor-engine peak FLOP/s, bytes / HBM bytes/s)

The tensor-engine peak is the 16-bit one for operands of 2 bytes or fewer and the fp32 one (a
quarter of it) otherwise. FLOPs and bytes come from the op's input shapes and dtypes as
``torch.profiler`` records them (``record_shapes=True``), by op family:

- **matmul** (``mm``, ``addmm``, ``bmm``, ``baddbmm``, ``matmul``): ``2·B·M·K·N`` for
  ``[.., M, K] @ [.., K, N]`` (``B`` the broadcast batch); ``linear`` (``x[.., K]``,
  ``weight[N, K]``): ``2·(numel(x)/K)·K·N``. Bytes: every input and the output once.
- **conv** (``conv1d``/``conv2d``/``conv3d``, ``convolution``, ``_convolution``):
  ``2·N·C_out·prod(out spatial)·(C_in/groups)·prod(kernel)``, the output size from the recorded
  stride, padding and dilation (transposed: ``2·N·C_in·prod(in spatial)·(C_out/groups)·
  prod(kernel)``). Bytes: input, weight, bias and output once.
- **attention** (``scaled_dot_product_attention``): ``2·B·L·S·E + 2·B·L·S·Ev`` (``Q·Kᵀ`` and
  ``P·V``). Bytes: ``q``, ``k``, ``v``, the mask and the output once.
- **reduction** (``sum``, ``mean``, ``amax``, ``max``, ``var``, ``norm``, ...): bytes of every
  input read once (the output, one element per reduced row, is not counted); no FLOPs.
- **elementwise** and everything else that moves data (activations, ``softmax``, norms,
  ``copy_``, ``_to_copy``, ...): every input read once and the output — the size of the largest
  input — written once; an in-place op (``add_``) writes its first input, counted once.
  ``cat``/``stack`` write the sum of their inputs; ``embedding`` reads the indices and one row
  per index and writes the rows.
- **view** (``view``, ``reshape``, ``transpose``, ``expand``, ``slice``, ``empty``, ...): no
  data moves, 0 µs.

Ops without tensor inputs (``randn``, ``arange``) have no estimate. These are lower bounds —
an op at the roofline — not the cost model's per-instruction schedule, and are always labelled
``roofline`` in the profile.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

__all__ = ["Arg", "Estimate", "Peaks", "args_of", "estimate", "peaks"]


@dataclass(frozen=True)
class Peaks:
    """One logical NeuronCore's peak rates on a target (the cost model's per-core table, times
    the target's default cores per logical core)."""

    target: str
    tensor_flops_16: float
    """Tensor-engine FLOP/s for operands of 2 bytes or fewer (bf16, fp16, fp8)."""
    tensor_flops_32: float
    """Tensor-engine FLOP/s for fp32 operands."""
    hbm_bytes_per_s: float
    """HBM bandwidth over every DMA queue, bytes/s."""

    def tensor_flops(self, itemsize: int) -> float:
        """The tensor-engine peak for operands of ``itemsize`` bytes."""
        return self.tensor_flops_16 if itemsize <= 2 else self.tensor_flops_32


@functools.cache
def peaks(target: str = "trn2") -> Peaks:
    """The peak rates of ``target`` (``trn1``, ``trn2``, ``trn3``); ``ValueError`` for another."""
    from torch_nki import _native

    t16, t32, hbm = _native.peaks(target)
    return Peaks(target, float(t16), float(t32), float(hbm))


@dataclass(frozen=True)
class Arg:
    """One argument of a recorded op call."""

    shape: tuple[int, ...] | None
    """The tensor's shape; ``None`` for an argument that is not a tensor."""
    itemsize: int = 4
    """Bytes per element of the tensor."""
    value: Any = None
    """The argument's value when it is not a tensor (a scalar or a list of ints), if recorded."""

    @property
    def numel(self) -> int:
        return math.prod(self.shape) if self.shape is not None else 0

    @property
    def bytes(self) -> int:
        return self.numel * self.itemsize


@dataclass(frozen=True)
class Estimate:
    """The roofline estimate of one call of an op."""

    op: str
    family: str
    """``matmul``, ``conv``, ``attention``, ``reduction``, ``elementwise`` or ``view``."""
    flops: float
    bytes: float
    us: float
    """``max(flops / tensor peak, bytes / HBM bandwidth)``, µs."""
    bound: str
    """``tensor`` when the FLOPs take longer than the bytes, else ``hbm``."""


_ITEMSIZE = {
    "double": 8,
    "float": 4,
    "c10::Half": 2,
    "c10::BFloat16": 2,
    "long int": 8,
    "int": 4,
    "short int": 2,
    "signed char": 1,
    "unsigned char": 1,
    "bool": 1,
    "c10::Float8_e4m3fn": 1,
    "c10::Float8_e5m2": 1,
    "c10::complex<float>": 8,
    "c10::complex<double>": 16,
}
_NOT_TENSORS = {"", "Scalar", "ScalarList", "None", "GenericList", "TensorList"}

MATMUL = frozenset({"aten::mm", "aten::addmm", "aten::bmm", "aten::baddbmm", "aten::matmul"})
CONV = frozenset({"aten::conv1d", "aten::conv2d", "aten::conv3d", "aten::convolution", "aten::_convolution"})
ATTENTION = frozenset({"aten::scaled_dot_product_attention"})
REDUCTION = frozenset(
    f"aten::{n}"
    for n in (
        "sum",
        "amax",
        "amin",
        "max",
        "min",
        "mean",
        "prod",
        "var",
        "std",
        "var_mean",
        "std_mean",
        "norm",
        "linalg_vector_norm",
        "argmax",
        "argmin",
        "logsumexp",
        "any",
        "all",
        "count_nonzero",
    )
)
VIEW = frozenset(
    f"aten::{n}"
    for n in (
        "view",
        "reshape",
        "_reshape_alias",
        "_unsafe_view",
        "t",
        "transpose",
        "permute",
        "expand",
        "expand_as",
        "slice",
        "select",
        "unsqueeze",
        "squeeze",
        "as_strided",
        "detach",
        "alias",
        "split",
        "split_with_sizes",
        "chunk",
        "unbind",
        "narrow",
        "view_as",
        "flatten",
        "unflatten",
        "resolve_conj",
        "resolve_neg",
        "lift_fresh",
        "contiguous",
        "empty",
        "empty_like",
        "empty_strided",
        "numpy_T",
    )
)
CONCAT = frozenset({"aten::cat", "aten::stack"})


def args_of(event: Any) -> list[Arg]:
    """The arguments of a ``torch.profiler`` event (``record_shapes=True``): shapes from
    ``input_shapes``, element sizes from ``input_dtypes`` (4 bytes where torch records none),
    scalar and list values from ``concrete_inputs``. A tensor list is one argument per tensor."""
    shapes = list(getattr(event, "input_shapes", None) or [])
    dtypes = list(getattr(event, "input_dtypes", None) or [])
    values = list(getattr(event, "concrete_inputs", None) or [])
    out = []
    for i, shape in enumerate(shapes):
        dtype = dtypes[i] if i < len(dtypes) else None
        value = values[i] if i < len(values) else None
        if isinstance(shape, list | tuple) and shape and isinstance(shape[0], list | tuple):
            out += [Arg(tuple(int(d) for d in s), 4) for s in shape]  # a tensor list
        elif dtype is not None and dtype not in _NOT_TENSORS:
            out.append(Arg(tuple(int(d) for d in shape or ()), _ITEMSIZE.get(dtype, 4)))
        elif dtype is None and shape:
            out.append(Arg(tuple(int(d) for d in shape), 4))
        else:
            out.append(Arg(None, 0, value))
    return out


def _matmul(a: tuple[int, ...], b: tuple[int, ...]) -> tuple[float, int]:
    """FLOPs and output elements of ``torch.matmul`` on shapes ``a`` and ``b``."""
    a2 = a if len(a) >= 2 else (1, *a)
    b2 = b if len(b) >= 2 else (*b, 1)
    m, k, n = a2[-2], a2[-1], b2[-1]
    batch = _broadcast(a2[:-2], b2[:-2])
    return 2.0 * batch * m * k * n, batch * m * n


def _broadcast(a: tuple[int, ...], b: tuple[int, ...]) -> int:
    width = max(len(a), len(b))
    pa, pb = (1,) * (width - len(a)) + a, (1,) * (width - len(b)) + b
    return math.prod(max(x, y) for x, y in zip(pa, pb, strict=True))


def _ints(value: Any, n: int, default: int) -> list[int]:
    if isinstance(value, int) and not isinstance(value, bool):
        return [value] * n
    if isinstance(value, list | tuple) and value and all(isinstance(v, int) for v in value):
        return [int(v) for v in value] * (n if len(value) == 1 else 1)
    return [default] * n


def _conv(op: str, args: list[Arg]) -> tuple[float, int] | None:
    """FLOPs and output elements of a convolution (see the module documentation)."""
    if len(args) < 2 or args[0].shape is None or args[1].shape is None or len(args[0].shape) < 3:
        return None
    x, w = args[0].shape, args[1].shape
    n, spatial, kernel = x[0], x[2:], w[2:]
    if len(kernel) != len(spatial):
        return None
    dims = len(spatial)

    def at(i: int) -> Any:
        return args[i].value if i < len(args) else None

    stride, dilation = _ints(at(3), dims, 1), _ints(at(5), dims, 1)
    padding_value = at(4)
    transposed = op in {"aten::convolution", "aten::_convolution"} and bool(at(6))
    groups_value = at(8) if op in {"aten::convolution", "aten::_convolution"} else at(6)
    groups = groups_value if isinstance(groups_value, int) and groups_value > 0 else 1
    if transposed:
        out_pad = _ints(at(7), dims, 0)
        padding = _ints(padding_value, dims, 0)
        out = [
            (s - 1) * st - 2 * p + d * (k - 1) + op_ + 1
            for s, st, p, d, k, op_ in zip(spatial, stride, padding, dilation, kernel, out_pad, strict=True)
        ]
        c_in, c_out = w[0], w[1] * groups
        flops = 2.0 * n * c_in * math.prod(spatial) * (c_out // groups) * math.prod(kernel)
        return flops, n * c_out * math.prod(out)
    if padding_value == "same":
        out = list(spatial)
    else:
        padding = _ints(padding_value, dims, 0)
        out = [
            (s + 2 * p - d * (k - 1) - 1) // st + 1
            for s, st, p, d, k in zip(spatial, stride, padding, dilation, kernel, strict=True)
        ]
    c_out, c_in_per_group = w[0], w[1]
    flops = 2.0 * n * c_out * math.prod(out) * c_in_per_group * math.prod(kernel)
    return flops, n * c_out * math.prod(out)


def _compute(op: str, tensors: list[Arg], args: list[Arg]) -> tuple[str, float, float] | None:
    """Family, FLOPs and bytes of one call, or ``None`` without an estimate."""
    if op in VIEW:
        return "view", 0.0, 0.0
    if not tensors:
        return None
    itemsize = tensors[0].itemsize
    read = float(sum(t.bytes for t in tensors))
    shapes = [t.shape for t in tensors if t.shape is not None]
    if op in MATMUL or op == "aten::linear":
        first = 1 if op in {"aten::addmm", "aten::baddbmm"} else 0
        if len(shapes) < first + 2:
            return None
        a, b = shapes[first], shapes[first + 1]
        if op == "aten::linear":
            b = tuple(reversed(b)) if len(b) == 2 else b
        flops, out = _matmul(a, b)
        return "matmul", flops, read + out * itemsize
    if op in CONV:
        conv = _conv(op, args)
        return None if conv is None else ("conv", conv[0], read + conv[1] * itemsize)
    if op in ATTENTION and len(shapes) >= 3:
        q, k, v = shapes[:3]
        batch, length, source = math.prod(q[:-2]), q[-2], k[-2]
        flops = 2.0 * batch * length * source * (q[-1] + v[-1])
        return "attention", flops, read + batch * length * v[-1] * itemsize
    if op in REDUCTION:
        return "reduction", 0.0, read
    if op in CONCAT:
        return "elementwise", 0.0, 2 * read
    if op == "aten::embedding" and len(tensors) >= 2 and shapes[0]:
        weight, indices = tensors[0], tensors[1]
        rows = indices.numel * (weight.numel // max(weight.shape[0], 1) if weight.shape else 1)
        return "elementwise", 0.0, indices.bytes + 2.0 * rows * weight.itemsize
    if op.endswith("_"):  # in place: the destination is written, the others read
        return "elementwise", 0.0, read
    largest = max(tensors, key=lambda t: t.numel)
    return "elementwise", 0.0, read + largest.bytes


def estimate(op: str, args: Sequence[Arg], target: str = "trn2") -> Estimate | None:
    """The roofline estimate of one call of ATen op ``op`` (``aten::mm``) with ``args`` on
    ``target``, or ``None`` when the op has no estimate (no tensor inputs). See the module
    documentation for the formulas."""
    args = list(args)
    tensors = [a for a in args if a.shape is not None]
    found = _compute(op, tensors, args)
    if found is None:
        return None
    family, flops, nbytes = found
    rates = peaks(target)
    itemsize = tensors[0].itemsize if tensors else 4
    compute_s = flops / rates.tensor_flops(itemsize)
    memory_s = nbytes / rates.hbm_bytes_per_s
    bound = "tensor" if compute_s > memory_s else "hbm"
    return Estimate(op, family, flops, nbytes, max(compute_s, memory_s) * 1e6, bound)

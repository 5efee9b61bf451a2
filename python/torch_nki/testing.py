"""What every test suite needs to know about an op, read from the registry: its declared
samples, its ATen reference and its tolerance.

A kernel declares these beside its contract (``reference(...)``, ``sample(...)``,
``tolerance(...)`` in its ``#[kernel]`` attribute); the project's suites, the fixture generator
and the demo iterate :func:`ops_with_reference` and :func:`sample_inputs`, so a new kernel is
tested everywhere without editing any suite. Out-of-tree kernel authors can use the same helpers::

    from torch_nki import testing

    for sample in testing.sample_inputs("rmsnorm"):
        actual = testing.call(sample)
        expected = testing.reference(sample)
        testing.assert_close(sample, actual, expected)
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import torch

import torch_nki
from torch_nki._dtypes import NKI_TO_TORCH, TORCH_TO_NKI, caller_name
from torch_nki._manifest import OpSpec, SampleSpec
from torch_nki._register import Registration

__all__ = [
    "TORCH_TO_NKI",
    "SampleInput",
    "assert_close",
    "backward_kernels",
    "backward_sample",
    "backward_sample_inputs",
    "bench_input",
    "call",
    "fixed_dtype",
    "index_domains",
    "index_values",
    "op_spec",
    "ops_with_reference",
    "public_outputs",
    "reference",
    "sample_inputs",
    "tolerances",
    "torch_op",
    "uniform",
]

#: Makes a sample tensor: ``make(shape, dtype) -> Tensor``.
MakeTensor = Callable[[Sequence[int], torch.dtype], torch.Tensor]


def _lookup(op: str) -> tuple[Registration, OpSpec]:
    """The registration and spec of ``op``: ``name`` in ``torch.ops.neuron``, or ``ns::name``
    for a kernel module loaded into another namespace."""
    from torch_nki._register import registrations

    torch_nki._registration()
    namespace, _, name = op.rpartition("::")
    namespace = namespace or "neuron"
    for reg in registrations():
        if reg.namespace == namespace and name in reg.ops:
            return reg, reg.ops[name]
    from torch_nki.errors import UnknownOpError

    known = ", ".join(torch_nki.ops())
    raise UnknownOpError(f"no kernel named `{op}` (registered: {known})")


def op_spec(op: str) -> OpSpec:
    """The manifest entry of kernel ``op`` (``name``, or ``ns::name`` outside ``neuron``);
    :class:`~torch_nki.errors.UnknownOpError` (a ``KeyError``) naming the registered ops
    otherwise."""
    return _lookup(op)[1]


def _qualified(spec: OpSpec, name: str) -> str:
    """``name`` (a kernel of the same module as ``spec``) as :func:`op_spec` takes it."""
    return name if spec.namespace == "neuron" else f"{spec.namespace}::{name}"


def _torch_op(spec: OpSpec, name: str) -> Any:
    return getattr(getattr(torch.ops, spec.namespace), name)


def torch_op(op: str) -> Any:
    """The ``torch.ops`` packet of kernel ``op`` (``name``, or ``ns::name`` outside ``neuron``)."""
    spec = op_spec(op)
    return _torch_op(spec, spec.name)


def _registered(keep: Callable[[OpSpec], bool]) -> list[str]:
    """Every registered kernel ``keep`` accepts, as :func:`op_spec` takes it: the package's and
    those of every loaded kernel crate (the registry, in registration order), each group sorted."""
    from torch_nki._register import registrations

    torch_nki._registration()
    out: list[str] = []
    for reg in registrations():
        out += sorted(_qualified(spec, name) for name, spec in reg.ops.items() if keep(spec))
    return out


def ops_with_reference() -> list[str]:
    """Kernels that declare an ATen reference (every forward kernel): the package's, sorted,
    then those of each loaded kernel crate (``ns::name`` outside ``neuron``)."""
    return _registered(lambda spec: bool(spec.reference))


def backward_kernels() -> list[str]:
    """Kernels that are the backward of another, in the order of :func:`ops_with_reference`."""
    return _registered(lambda spec: bool(spec.backward_of))


@dataclass(frozen=True)
class SampleInput:
    """One declared sample of an op, in one dtype, with tensors made."""

    op: str
    dtype: torch.dtype
    args: tuple[Any, ...]
    """Every argument in parameter order (scalars without a sample value take their default)."""
    index: int
    """Which ``sample(...)`` of the kernel this is (declaration order)."""

    @property
    def tensors(self) -> list[torch.Tensor]:
        """The tensor arguments, in parameter order."""
        return [a for a in self.args if isinstance(a, torch.Tensor)]

    def __str__(self) -> str:
        spec = op_spec(self.op)
        parts = []
        for p, a in zip(spec.params, self.args, strict=True):
            if isinstance(a, torch.Tensor):
                parts.append(f"{p.name}={list(a.shape)}")
            elif a is None and p.is_tensor:
                parts.append(f"{p.name}=None")
            else:
                parts.append(f"{p.name}={a!r}")
        return f"{self.op}({', '.join(parts)}) {TORCH_TO_NKI.get(self.dtype, self.dtype)}"


def uniform(seed: int = 0) -> MakeTensor:
    """A tensor maker drawing uniformly from [-1, 1) with its own seeded generator."""
    gen = torch.Generator().manual_seed(seed)

    def make(shape: Sequence[int], dtype: torch.dtype) -> torch.Tensor:
        return (torch.rand(tuple(shape), generator=gen) * 2 - 1).to(dtype)

    return make


def meta(shape: Sequence[int], dtype: torch.dtype) -> torch.Tensor:
    """A tensor maker for shapes and dtypes alone: an empty tensor on the meta device."""
    return torch.empty(tuple(shape), dtype=dtype, device="meta")


def fixed_dtype(spec: OpSpec, param: str) -> str | None:
    """The one dtype tensor parameter ``param`` allows (``target in {i32}``), if its rule allows
    only one: samples give it that dtype whatever dtype the case runs in."""
    for rule in spec.contract["dtypes"]:
        if rule["param"] == param and rule["rule"]["kind"] == "one_of" and len(rule["rule"]["allowed"]) == 1:
            return str(rule["rule"]["allowed"][0])
    return None


#: The index range of an integer input with no declared domain.
DEFAULT_INDEX_DOMAIN = (0, 100, None)


def index_values(u: torch.Tensor, domain: tuple[int, int, int | None] | None) -> torch.Tensor:
    """Integer sample values (int64, as torch's class targets) from uniform values ``u`` in
    [-1, 1): ``lo + floor((u + 1) / 2 * (hi - lo))`` in float64, and the domain's ``except``
    value (an ``ignore_index``) at every flat position ``i % 4 == 3``. The fixture generator and
    the Rust tests (``tests/src/prng.rs``) apply the same rule to the same values."""
    lo, hi, except_ = domain or DEFAULT_INDEX_DOMAIN
    v = (lo + torch.floor((u.double() + 1) / 2 * (hi - lo))).long().clamp(max=hi - 1)
    if except_ is not None:
        v.reshape(-1)[3::4] = except_
    return v


def _make_args(
    spec: OpSpec, sample: SampleSpec, dtype: torch.dtype, make: MakeTensor, requires_grad: bool
) -> tuple[Any, ...]:
    args: list[Any] = []
    for p in spec.params:
        if p.is_tensor:
            shape = sample.args[p.name]
            t = None if shape is None or fixed_dtype(spec, p.name) == "i32" else make(shape, dtype)
            if t is not None and requires_grad and t.is_floating_point():
                t.requires_grad_(True)
            args.append(t)
        else:
            args.append(sample.args.get(p.name, p.default))
    index_params = [
        i
        for i, p in enumerate(spec.params)
        if p.is_tensor and sample.args[p.name] is not None and args[i] is None
    ]
    if index_params:
        tensor_shapes = [sample.args[p.name] for p in spec.params if p.is_tensor]
        scalars = [a for p, a in zip(spec.params, args, strict=True) if not p.is_tensor]
        domains = dict(
            zip(tensor_params(spec), index_domains(spec, tensor_shapes, dtype, scalars), strict=True)
        )
        gen = uniform(0)
        # On the device the maker makes tensors on (``meta`` for shape-only callers).
        device = next((a.device for a in args if isinstance(a, torch.Tensor)), torch.device("cpu"))
        for i in index_params:
            p = spec.params[i]
            args[i] = index_values(gen(sample.args[p.name], torch.float32), domains[p.name]).to(device)
    return tuple(args)


def tensor_params(spec: OpSpec) -> list[str]:
    """The names of ``spec``'s tensor parameters, in order."""
    return [p.name for p in spec.params if p.is_tensor]


def index_domains(
    spec: OpSpec, shapes: Sequence[Sequence[int] | None], dtype: torch.dtype, scalars: Sequence[Any]
) -> list[tuple[int, int, int | None] | None]:
    """The index range each tensor parameter of ``spec`` declares (``Hbm::require_indices``) for
    a call with these tensor ``shapes`` (``None``: left out), in ``dtype`` and with these
    scalars; ``None`` where it declares none. Integer sample inputs are drawn from it."""
    names = tensor_params(spec)
    dtypes = [
        None if shape is None else fixed_dtype(spec, name) or TORCH_TO_NKI[dtype]
        for name, shape in zip(names, shapes, strict=True)
    ]
    native = _lookup(_qualified(spec, spec.name))[0].native
    shape_lists = [None if s is None else list(s) for s in shapes]
    return list(native.Signature(spec.name, shape_lists, dtypes, scalars).index_domains())


def bench_input(
    op: str, *, make: MakeTensor | None = None, dtype: torch.dtype | None = None
) -> SampleInput | None:
    """The op's declared ``bench(...)`` arguments (its representative large shape, in its bench
    dtype or in ``dtype``), or ``None`` for an op without one (backward kernels)."""
    spec = op_spec(op)
    if spec.bench is None:
        return None
    dtype = dtype or NKI_TO_TORCH[spec.bench.dtypes[0]]
    return SampleInput(op, dtype, _make_args(spec, spec.bench, dtype, make or uniform(), False), -1)


def sample_inputs(
    op: str,
    *,
    make: MakeTensor | None = None,
    dtypes: Sequence[torch.dtype] | None = None,
    requires_grad: bool = False,
) -> list[SampleInput]:
    """Every declared sample of ``op`` in every dtype it runs in (optionally only ``dtypes``),
    with tensors from ``make`` (default: :func:`uniform`)."""
    spec = op_spec(op)
    make = make or uniform()
    out: list[SampleInput] = []
    for index, sample in enumerate(spec.samples):
        for name in sample.dtypes:
            dtype = NKI_TO_TORCH[name]
            if dtypes is not None and dtype not in dtypes:
                continue
            out.append(SampleInput(op, dtype, _make_args(spec, sample, dtype, make, requires_grad), index))
    return out


def backward_sample(sample: SampleInput, make: MakeTensor | None = None) -> SampleInput:
    """The arguments the backward kernel of ``sample.op`` receives after a forward call on
    ``sample``, as its backward plan wires them: gradients of the public outputs from ``make``,
    saved inputs and outputs (the forward run once, with every output), the forward's
    scalars."""
    spec = op_spec(sample.op)
    if spec.backward is None:
        raise ValueError(f"{spec.qualname} declares no backward kernel")
    make = make or uniform(1)
    plan = spec.backward
    full = _torch_op(spec, spec.forward_op[0] if spec.forward_op else spec.name)
    with torch.no_grad():
        detached = [a.detach() if isinstance(a, torch.Tensor) else a for a in sample.args]
        outs = public_outputs(full(*detached))
    args = plan.arguments(
        plan.saved_values(detached, outs), detached, lambda i: make(outs[i].shape, outs[i].dtype)
    )
    return SampleInput(_qualified(spec, plan.kernel), sample.dtype, tuple(args), sample.index)


def bench_inputs(
    op: str, *, make: MakeTensor | None = None, dtype: torch.dtype | None = None
) -> tuple[SampleInput, SampleInput | None] | None:
    """The op's bench arguments (tensors from ``make``, default :func:`uniform`) and, for a
    backward kernel, the forward call at the forward's bench shape they derive from (``None``
    for an op with its own ``bench(...)``); ``None`` for an op with neither."""
    sample = bench_input(op, make=make, dtype=dtype)
    if sample is not None:
        return sample, None
    spec = op_spec(op)
    forward_op = _qualified(spec, spec.backward_of) if spec.backward_of else None
    forward = bench_input(forward_op, make=make, dtype=dtype) if forward_op else None
    if forward is None:
        return None
    return backward_sample(forward, make), forward


def backward_sample_inputs(op: str, *, dtypes: Sequence[torch.dtype] | None = None) -> list[SampleInput]:
    """Samples of backward kernel ``op``, derived from its forward's samples."""
    spec = op_spec(op)
    if spec.backward_of is None:
        raise ValueError(f"{spec.qualname} is not the backward kernel of any op")
    return [backward_sample(s) for s in sample_inputs(_qualified(spec, spec.backward_of), dtypes=dtypes)]


def call(sample: SampleInput) -> tuple[torch.Tensor, ...]:
    """Runs ``torch.ops.<namespace>.<op>`` on the sample; its outputs as a tuple."""
    spec = op_spec(sample.op)
    return public_outputs(_torch_op(spec, spec.name)(*sample.args))


def public_outputs(result: Any) -> tuple[torch.Tensor, ...]:
    """An op's result as a tuple of tensors."""
    return tuple(result) if isinstance(result, tuple | list) else (result,)


def reference(sample: SampleInput, args: Sequence[Any] | None = None) -> tuple[torch.Tensor, ...]:
    """Evaluates the op's declared ATen reference on ``args`` (default: the sample's), with the
    parameter names bound and ``torch``, ``F`` (``torch.nn.functional``) and ``dtype`` (the
    sample's dtype, even when ``args`` are upcast copies, for references that round an
    intermediate as the op does) in scope."""
    spec = op_spec(sample.op)
    if spec.reference is None:
        raise ValueError(f"{spec.qualname} declares no reference")
    env: dict[str, Any] = {p.name: a for p, a in zip(spec.params, args or sample.args, strict=True)}
    scope = {"torch": torch, "F": torch.nn.functional, "dtype": sample.dtype}
    code = compile(spec.reference, f"<reference of {spec.qualname}>", "eval")
    return public_outputs(eval(code, scope, env))


def tolerances(sample: SampleInput) -> list[tuple[float, float]]:
    """``(rtol, atol)`` for each public output, from the kernel's tolerance class (evaluated in
    Rust on the contract's bindings)."""
    reg, spec = _lookup(sample.op)
    tensors = [a for p, a in zip(spec.params, sample.args, strict=True) if p.is_tensor]
    scalars = [a for p, a in zip(spec.params, sample.args, strict=True) if not p.is_tensor]
    per_output = reg.native.Signature(
        spec.name,
        [None if t is None else tuple(t.shape) for t in tensors],
        [None if t is None else caller_name(t.dtype) for t in tensors],
        scalars,
    ).tolerance()
    result = []
    for out, tol in zip(spec.outputs, per_output, strict=True):
        if out.saved:
            continue
        if tol is None:
            raise ValueError(f"{spec.qualname}: no tolerance rule for output {out.name}")
        result.append(tol)
    return result


def assert_close(
    sample: SampleInput,
    actual: Sequence[torch.Tensor],
    expected: Sequence[torch.Tensor],
    tols: Sequence[tuple[float, float]] | None = None,
) -> None:
    """Asserts every output matches (shape, dtype, and ``|a - e| <= atol + rtol·|e|``)."""
    tols = tols or tolerances(sample)
    assert len(actual) == len(expected) == len(tols), (sample, len(actual), len(expected))
    for a, e, (rtol, atol) in zip(actual, expected, tols, strict=True):
        torch.testing.assert_close(a, e, rtol=rtol, atol=atol, msg=lambda m: f"{sample}: {m}")

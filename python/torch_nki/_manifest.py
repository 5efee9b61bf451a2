"""The registry manifest, parsed once into small immutable records."""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass
from typing import Any

from torch_nki import _backward
from torch_nki._backward import BackwardSpec

Scalar = float | int | bool

#: The manifest layout this package reads (``Manifest::version`` in the registry crate).
MANIFEST_VERSION = 4


@dataclass(frozen=True)
class ParamSpec:
    """One kernel parameter: a tensor or a scalar (``float``, ``int``, ``bool``) with its default;
    optional tensors and optional scalars (``float?``) default to ``None``."""

    name: str
    kind: str
    default: Scalar | None
    optional_scalar: bool = False

    @property
    def is_tensor(self) -> bool:
        """A tensor parameter, optional (``Tensor?``) or not."""
        return self.kind in ("tensor", "optional_tensor")

    @property
    def is_optional(self) -> bool:
        """An optional tensor (``Tensor?``) or scalar (``float?``), which may be ``None``."""
        return self.kind == "optional_tensor" or self.optional_scalar

    @property
    def has_default(self) -> bool:
        """Whether a call may leave it out."""
        return self.default is not None or self.is_optional


@dataclass(frozen=True)
class OutputSpec:
    """One kernel output: its name, and whether it is ``saved`` (kept for the backward kernel,
    not returned by the torch op)."""

    name: str
    saved: bool


@dataclass(frozen=True)
class SampleSpec:
    """One declared set of sample arguments: tensor shapes (``None`` for an absent optional
    tensor) and scalar values by parameter name, and the dtypes to run it in (empty: every float
    dtype the contract admits)."""

    args: dict[str, Any]
    dtypes: tuple[str, ...]


@dataclass(frozen=True)
class OpSpec:
    """One registered kernel as the manifest describes it."""

    name: str
    schema: str
    doc: str
    location: str
    replaces: tuple[str, ...]
    params: tuple[ParamSpec, ...]
    contract: dict[str, Any]
    contract_text: str
    """The shape contract rendered by Rust, as the attribute writes it."""
    dtype_text: str
    """The dtype contract rendered by Rust."""
    outputs: tuple[OutputSpec, ...]
    forward_op: tuple[str, str] | None
    """``(name, schema)`` of the op returning every output, for kernels with saved outputs."""
    backward: BackwardSpec | None
    """The backward kernel, what the forward saves and how a call is wired into it."""
    backward_of: str | None
    reference: str | None
    samples: tuple[SampleSpec, ...]
    tolerance: dict[str, Any]
    autocast: str
    """The ``torch.autocast`` policy: ``keep``, ``lower``, ``fp32`` or ``promote``."""
    bench: SampleSpec | None
    """The representative large arguments ``torch-nki bench`` grades the op at (one dtype)."""
    namespace: str = "neuron"
    """The ``torch.ops`` namespace the op is registered in."""
    sharding: dict[str, Any] = dataclasses.field(default_factory=dict, compare=False, hash=False)
    """What each dimension symbol is when the op's tensors are split across devices, as Rust
    derives it (see :mod:`torch_nki._sharding`)."""

    @property
    def qualname(self) -> str:
        """``<namespace>::<name>``."""
        return f"{self.namespace}::{self.name}"

    def param(self, name: str) -> ParamSpec:
        """The parameter called ``name``."""
        return next(p for p in self.params if p.name == name)

    @property
    def tensor_params(self) -> tuple[ParamSpec, ...]:
        return tuple(p for p in self.params if p.is_tensor)

    @property
    def scalar_params(self) -> tuple[ParamSpec, ...]:
        return tuple(p for p in self.params if not p.is_tensor)

    @property
    def num_outputs(self) -> int:
        """Outputs of the kernel (saved ones included)."""
        return len(self.outputs)

    @property
    def public_outputs(self) -> tuple[OutputSpec, ...]:
        """The outputs the torch op returns."""
        return tuple(o for o in self.outputs if not o.saved)

    @property
    def summary(self) -> str:
        """The first paragraph of the doc comment, on one line."""
        first = self.doc.strip().split("\n\n", 1)[0]
        return " ".join(line.strip() for line in first.splitlines())


def _param(raw: dict[str, Any]) -> ParamSpec:
    kind = raw["kind"]
    return ParamSpec(
        name=raw["name"],
        kind=kind["kind"],
        default=kind.get("default"),
        optional_scalar=bool(kind.get("optional", False)),
    )


def _op(op: dict[str, Any]) -> OpSpec:
    fwd = op.get("forward_op")
    bwd = op.get("backward")
    return OpSpec(
        name=op["name"],
        schema=op["schema"],
        doc=op["doc"],
        location=op["location"],
        replaces=tuple(op["replaces"]),
        params=tuple(_param(p) for p in op["params"]),
        contract=op["contract"],
        contract_text=op["contract_text"],
        dtype_text=op["dtype_text"],
        outputs=tuple(OutputSpec(o["name"], bool(o["saved"])) for o in op["contract"]["outputs"]),
        forward_op=None if fwd is None else (fwd["name"], fwd["schema"]),
        backward=None if bwd is None else _backward.parse(bwd),
        backward_of=op.get("backward_of"),
        reference=op.get("reference"),
        samples=tuple(SampleSpec(dict(s["args"]), tuple(s["dtypes"])) for s in op["samples"]),
        tolerance=op["tolerance"],
        autocast=op["autocast"],
        bench=None
        if op.get("bench") is None
        else SampleSpec(dict(op["bench"]["args"]), tuple(op["bench"]["dtypes"])),
        sharding=op["sharding"],
    )


def parse(text: str, namespace: str = "neuron") -> tuple[OpSpec, ...]:
    """Parses the JSON manifest of a native module's ``manifest()``, for ops registered in
    ``torch.ops.<namespace>``."""
    doc = json.loads(text)
    if doc.get("version") != MANIFEST_VERSION:
        raise ValueError(
            f"torch_nki: unsupported manifest version {doc.get('version')!r} (this package reads "
            f"{MANIFEST_VERSION}); rebuild the native module"
        )
    return tuple(dataclasses.replace(_op(op), namespace=namespace) for op in doc["ops"])

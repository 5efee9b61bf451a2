"""The registry manifest, parsed once into small immutable records."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

Scalar = float | int | bool


@dataclass(frozen=True)
class ParamSpec:
    """One kernel parameter: a tensor or a scalar (``float``, ``int``, ``bool``) with its default."""

    name: str
    kind: str
    default: Scalar | None

    @property
    def is_tensor(self) -> bool:
        return self.kind == "tensor"

    @property
    def has_default(self) -> bool:
        return self.default is not None


@dataclass(frozen=True)
class OpSpec:
    """One registered op as the manifest describes it."""

    name: str
    schema: str
    doc: str
    location: str
    replaces: tuple[str, ...]
    params: tuple[ParamSpec, ...]
    contract: dict[str, Any]

    @property
    def qualname(self) -> str:
        """``neuron::<name>``."""
        return f"neuron::{self.name}"

    @property
    def tensor_params(self) -> tuple[ParamSpec, ...]:
        return tuple(p for p in self.params if p.is_tensor)

    @property
    def scalar_params(self) -> tuple[ParamSpec, ...]:
        return tuple(p for p in self.params if not p.is_tensor)

    @property
    def num_outputs(self) -> int:
        return len(self.contract["outputs"])

    @property
    def summary(self) -> str:
        """The first line of the doc comment."""
        lines = [line.strip() for line in self.doc.strip().splitlines()]
        return lines[0] if lines else ""


def _param(raw: dict[str, Any]) -> ParamSpec:
    kind = raw["kind"]
    return ParamSpec(name=raw["name"], kind=kind["kind"], default=kind.get("default"))


def parse(text: str) -> tuple[OpSpec, ...]:
    """Parses the JSON manifest of ``_native.manifest()``."""
    doc = json.loads(text)
    if doc.get("version") != 1:
        raise ValueError(f"torch_nki: unsupported manifest version {doc.get('version')!r}")
    return tuple(
        OpSpec(
            name=op["name"],
            schema=op["schema"],
            doc=op["doc"],
            location=op["location"],
            replaces=tuple(op["replaces"]),
            params=tuple(_param(p) for p in op["params"]),
            contract=op["contract"],
        )
        for op in doc["ops"]
    )

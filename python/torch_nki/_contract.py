"""The kernel contract, evaluated in Python from the manifest's contract data.

The Rust side (``_native.check``) is the authority whenever shapes are concrete. This module
covers what it cannot see:

- torch dtypes with no kernel equivalent (``int32``, ``float64`` before downcasting...): the
  ``TypeError`` is worded exactly like the Rust contract's messages;
- symbolic shapes under ``torch.compile`` (dynamic shapes): output dims are evaluated on the
  input ``SymInt``s without forcing them to concrete ints, and equal-symbol constraints become
  ``torch._check_value`` assertions instead of guards on specific values.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import torch

from torch_nki._dtypes import NKI_TO_TORCH, TORCH_TO_NKI, torch_name
from torch_nki._manifest import OpSpec

#: A dimension: a plain int, or a SymInt under torch.compile with dynamic shapes.
IntLike = int | torch.SymInt

_BINARY: dict[str, Callable[[Any, Any], Any]] = {
    "add": lambda a, b: a + b,
    "sub": lambda a, b: a - b,
    "mul": lambda a, b: a * b,
    "div": lambda a, b: a // b,
    "rem": lambda a, b: a % b,
}


def _pattern_text(dims: Sequence[dict[str, Any]]) -> str:
    parts = []
    for d in dims:
        kind = d["kind"]
        parts.append(f"..{d['name']}" if kind == "rest" else str(d["name"] if kind == "sym" else d["value"]))
    return "[" + ", ".join(parts) + "]"


def _shape_text(shape: Sequence[IntLike]) -> str:
    return "[" + ", ".join(str(d) for d in shape) + "]"


def eval_dim(expr: dict[str, Any], dims: dict[str, IntLike]) -> IntLike:
    """Evaluates a contract dim expression (``sym``, ``const``, ``binary``) on bound symbols."""
    kind = expr["kind"]
    if kind == "sym":
        return dims[expr["name"]]
    if kind == "const":
        return int(expr["value"])
    if kind == "binary":
        return _BINARY[expr["op"]](eval_dim(expr["lhs"], dims), eval_dim(expr["rhs"], dims))
    raise ValueError(f"torch_nki: unknown dim expression kind {kind!r}")


class ContractEval:
    """One op's contract, ready to evaluate on torch metadata."""

    def __init__(self, spec: OpSpec) -> None:
        self.op = spec.name
        self.contract = spec.contract
        self.params = [p.name for p in spec.tensor_params]
        self.inputs: list[tuple[str, list[dict[str, Any]], str]] = [
            (i["param"], i["dims"], _pattern_text(i["dims"])) for i in spec.contract["inputs"]
        ]
        self.dtype_rules: list[tuple[str, dict[str, Any]]] = [
            (r["param"], r["rule"]) for r in spec.contract["dtypes"]
        ]
        self.index = {name: i for i, name in enumerate(self.params)}

    # -- dtypes ---------------------------------------------------------------------------------

    def dtype_error(self, dtypes: Sequence[torch.dtype]) -> TypeError | None:
        """The contract's ``TypeError`` for the first argument whose torch dtype has no kernel
        equivalent, or ``None`` if every dtype maps to a kernel dtype."""

        def name(dt: torch.dtype) -> str:
            return TORCH_TO_NKI.get(dt) or torch_name(dt)

        for param, rule in self.dtype_rules:
            actual = dtypes[self.index[param]]
            if actual in TORCH_TO_NKI:
                continue
            if rule["kind"] == "one_of":
                allowed = ", ".join(rule["allowed"])
                msg = f"{param} has dtype {name(actual)}, but the contract allows {param} in {{{allowed}}}"
            else:
                other = rule["param"]
                msg = (
                    f"{param} has dtype {name(actual)}, but the contract needs {param} = {other} "
                    f"({other} has dtype {name(dtypes[self.index[other]])})"
                )
            return TypeError(f"neuron::{self.op}: {msg}")
        for param, actual in zip(self.params, dtypes, strict=True):
            if actual not in TORCH_TO_NKI:
                known = ", ".join(TORCH_TO_NKI.values())
                return TypeError(
                    f"neuron::{self.op}: {param} has dtype {name(actual)}, but kernels take {{{known}}}"
                )
        return None

    def output_dtypes(self, dtypes: Sequence[torch.dtype]) -> list[torch.dtype]:
        """Output dtypes from the contract's output rules (``same_as`` / ``fixed``)."""
        out = []
        for spec in self.contract["outputs"]:
            rule = spec["dtype"]
            if rule["kind"] == "same_as":
                out.append(dtypes[self.index[rule["param"]]])
            else:
                out.append(NKI_TO_TORCH[rule["dtype"]])
        return out

    # -- shapes ---------------------------------------------------------------------------------

    def _bind(
        self, shapes: Sequence[Sequence[IntLike]]
    ) -> tuple[dict[str, IntLike], dict[str, list[IntLike]]]:
        if len(shapes) != len(self.inputs):
            raise ValueError(
                f"neuron::{self.op}: expected {len(self.inputs)} tensor arguments, got {len(shapes)}"
            )
        dims: dict[str, IntLike] = {}
        rests: dict[str, list[IntLike]] = {}
        origin: dict[str, str] = {}
        for (param, pattern, pat), shape in zip(self.inputs, shapes, strict=True):
            shape = list(shape)
            has_rest = any(d["kind"] == "rest" for d in pattern)
            fixed = len(pattern) - int(has_rest)
            if (len(shape) < fixed) if has_rest else (len(shape) != fixed):
                need = f"rank >= {fixed}" if has_rest else f"rank {fixed}"
                raise ValueError(
                    f"neuron::{self.op}: {param} has rank {len(shape)} (shape {_shape_text(shape)}), "
                    f"but the contract {param}{pat} needs {need}"
                )
            rest_len = len(shape) - fixed
            pos = 0
            for d in pattern:
                kind = d["kind"]
                if kind == "rest":
                    seq = shape[pos : pos + rest_len]
                    pos += rest_len
                    name = d["name"]
                    if name in rests:
                        prev = rests[name]
                        torch._check_value(
                            len(prev) == len(seq) and all(a == b for a, b in zip(prev, seq, strict=False)),
                            lambda p=param, s=shape, pt=pat, n=name, pv=prev: (
                                f"neuron::{self.op}: {p} has shape {_shape_text(s)}, but the contract "
                                f"{p}{pt} needs ..{n} = {_shape_text(pv)} (bound by {origin[n]})"
                            ),
                        )
                    else:
                        rests[name] = seq
                        origin[name] = f"{param}{pat} = {_shape_text(shape)}"
                    continue
                v = shape[pos]
                if kind == "const":
                    torch._check_value(
                        v == d["value"],
                        lambda p=param, s=shape, pt=pat, i=pos, c=d["value"]: (
                            f"neuron::{self.op}: {p} has shape {_shape_text(s)}, but the contract "
                            f"{p}{pt} needs dimension {i} = {c}"
                        ),
                    )
                else:
                    name = d["name"]
                    if name in dims:
                        torch._check_value(
                            dims[name] == v,
                            lambda p=param, s=shape, pt=pat, n=name: (
                                f"neuron::{self.op}: {p} has shape {_shape_text(s)}, but the contract "
                                f"{p}{pt} needs {n} = {dims[n]} (bound by {origin[n]})"
                            ),
                        )
                    else:
                        dims[name] = v
                        origin[name] = f"{param}{pat} = {_shape_text(shape)}"
                pos += 1
        return dims, rests

    def output_shapes(self, shapes: Sequence[Sequence[IntLike]]) -> list[list[IntLike]]:
        """Output shapes evaluated on (possibly symbolic) input shapes.

        Equal-symbol constraints become ``torch._check_value`` assertions; ``require(...)``
        clauses are left to the kernel call (checking them would guard on symbolic sizes).
        """
        dims, rests = self._bind(shapes)
        out: list[list[IntLike]] = []
        for spec in self.contract["outputs"]:
            shape: list[IntLike] = []
            for d in spec["shape"]:
                if d["kind"] == "rest":
                    shape.extend(rests[d["name"]])
                else:
                    shape.append(eval_dim(d["expr"], dims))
            out.append(shape)
        return out

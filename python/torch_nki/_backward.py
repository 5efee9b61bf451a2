"""A forward kernel's backward plan, as the manifest carries it, and the three things every
caller does with it.

The plan is computed once, in Rust (``BackwardPlan`` in ``nki_core::autodiff``, by the same rule
the ``#[kernel]`` macro checks at compile time): what a forward call saves, what each backward
kernel argument is (the gradient of a forward output, a saved tensor, or a forward scalar) and
which forward argument each backward output is the gradient of, all by position. Autograd, the
test helpers and the bench follow it; nothing in Python matches ``grad_<name>`` or saved names.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Literal


@dataclass(frozen=True)
class Saved:
    """One tensor a forward call keeps: forward argument ``index`` (``kind == "input"``) or
    forward output ``index`` (``"output"``; saved outputs included)."""

    kind: Literal["input", "output"]
    index: int


@dataclass(frozen=True)
class Arg:
    """What one backward kernel argument is: the gradient of forward output ``index``
    (``"grad"``), saved tensor ``index`` (``"saved"``) or forward argument ``index``
    (``"scalar"``)."""

    kind: Literal["grad", "saved", "scalar"]
    index: int


@dataclass(frozen=True)
class BackwardSpec:
    """A forward kernel's backward declaration and its plan."""

    kernel: str
    """The backward kernel (an op of the same module)."""
    saves: tuple[str, ...]
    """What the forward saves, by name, as declared (for messages and listings)."""
    saved: tuple[Saved, ...]
    """What the forward saves, one per ``saves`` name."""
    args: tuple[Arg, ...]
    """One per backward kernel parameter, in order."""
    grads: tuple[int, ...]
    """One per backward kernel output: the forward argument position it is the gradient of."""

    def saved_values(self, inputs: Sequence[Any], outputs: Sequence[Any]) -> list[Any]:
        """The tensors to keep after a forward call with ``inputs`` (every argument) that
        returned ``outputs`` (every output)."""
        return [inputs[s.index] if s.kind == "input" else outputs[s.index] for s in self.saved]

    def arguments(
        self, saved: Sequence[Any], inputs: Sequence[Any], gradient: Callable[[int], Any]
    ) -> list[Any]:
        """The backward kernel's arguments: ``saved`` as :meth:`saved_values` made them, scalars
        from ``inputs`` (the forward's arguments) and ``gradient(i)``, the gradient of forward
        output ``i``."""
        out: list[Any] = []
        for a in self.args:
            if a.kind == "grad":
                out.append(gradient(a.index))
            elif a.kind == "saved":
                out.append(saved[a.index])
            else:
                out.append(inputs[a.index])
        return out

    def output_gradients(self, args: Sequence[Any], num_outputs: int) -> list[Any]:
        """Per forward output, the backward argument among ``args`` that is its gradient
        (``None`` for an output the backward kernel takes no gradient of)."""
        grads: list[Any] = [None] * num_outputs
        for a, value in zip(self.args, args, strict=True):
            if a.kind == "grad":
                grads[a.index] = value
        return grads


def _saved(raw: dict[str, Any]) -> Saved:
    kind = raw["kind"]
    if kind == "input":
        return Saved("input", int(raw["param"]))
    if kind == "output":
        return Saved("output", int(raw["output"]))
    raise ValueError(f"torch_nki: unknown saved tensor kind {kind!r} in the manifest")


def _arg(raw: dict[str, Any]) -> Arg:
    kind = raw["kind"]
    if kind == "grad":
        return Arg("grad", int(raw["output"]))
    if kind == "saved":
        return Arg("saved", int(raw["slot"]))
    if kind == "scalar":
        return Arg("scalar", int(raw["param"]))
    raise ValueError(f"torch_nki: unknown backward argument kind {kind!r} in the manifest")


def parse(raw: dict[str, Any]) -> BackwardSpec:
    """The manifest's ``backward`` object of one op."""
    return BackwardSpec(
        kernel=raw["kernel"],
        saves=tuple(raw["saves"]),
        saved=tuple(_saved(s) for s in raw["saved"]),
        args=tuple(_arg(a) for a in raw["args"]),
        grads=tuple(int(g) for g in raw["grads"]),
    )

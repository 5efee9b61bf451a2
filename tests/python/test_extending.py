"""Teaching ``torch_nki.swap`` a module kind and ``backend="nki"`` a graph pattern through the
public API (``torch_nki.register_adapter`` / ``register_pattern``): a user's own module swaps in
and verifies, a user's graph pattern is rewritten and logged, both go away when unregistered, the
built-in kinds and patterns are registered the same way, and bad registrations are clear errors.
A crate's own kind and pattern: ``test_plugins.py``."""

from __future__ import annotations

import operator
from collections.abc import Iterator
from typing import Any

import pytest
import torch

import torch_nki
from torch_nki import adapters, compiler
from torch_nki.compiler import Rewriter


class Swish(torch.nn.Module):
    """A user's own activation module: ``x * sigmoid(x)``, which ``neuron.silu`` computes, but no
    kernel's ``replaces`` names this class."""

    def __init__(self, features: int) -> None:
        super().__init__()
        self.features = features

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * torch.sigmoid(x)


def _swish_example(module: Any, generator: torch.Generator) -> tuple[tuple[Any, ...], dict[str, Any]]:
    return (torch.randn(2, 3, module.features, generator=generator),), {}


SWISH = torch_nki.Adapter(
    "Swish",
    ("silu",),
    recognise=lambda m: isinstance(getattr(m, "features", None), int),
    forward=lambda m, x: torch.ops.neuron.silu(x),
    example=_swish_example,
    modules=("*Swish",),
)


def _x_sigmoid_x(rw: Rewriter) -> None:
    """``x * sigmoid(x)`` (either order) → ``neuron.silu(x)``."""
    for node in rw.calls(operator.mul, torch.mul):
        for x, s in (node.args, tuple(reversed(node.args))):
            if rw.is_call(s, torch.sigmoid) and s.args[0] is x and rw.only_user(s, node):
                if rw.attempt(node, torch.ops.neuron.silu.default, (x,)):
                    rw.erase_unused(s)
                break


X_SIGMOID_X = torch_nki.Pattern("x * sigmoid(x)", ("silu",), _x_sigmoid_x)


@pytest.fixture
def registered() -> Iterator[None]:
    torch_nki.register_adapter(SWISH)
    torch_nki.register_pattern(X_SIGMOID_X)
    yield
    torch_nki.unregister_adapter("Swish")
    torch_nki.unregister_pattern("x * sigmoid(x)")


def model() -> torch.nn.Module:
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(16, 24), Swish(24), torch.nn.Linear(24, 8))


def test_nothing_matches_the_users_module_before_its_kind_is_registered() -> None:
    m = model()
    report = torch_nki.swap(m)
    assert [e.kind for e in report.entries] == ["Linear", "Linear"]
    torch_nki.unswap(m)


@pytest.mark.usefixtures("registered")
def test_a_registered_kind_swaps_in_and_verifies() -> None:
    m = model()
    x = torch.randn(4, 16)
    with torch.no_grad():
        want = m(x)
    report = torch_nki.swap(m, torch_nki.profile(m, x, steps=1))
    entry = next(e for e in report.entries if e.name == "1")
    assert (entry.kind, entry.kernels, entry.status) == ("Swish", ("silu",), "swapped"), report.to_markdown()
    assert "forward" in m[1].__dict__
    with torch.no_grad(), torch_nki.hotspots.record_neuron_calls() as calls:
        got = m(x)
    assert [op for op, _ in calls] == ["linear", "silu", "linear"]
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)
    torch_nki.unswap(m)


@pytest.mark.usefixtures("registered")
def test_a_registered_kind_still_reverts_a_module_that_computes_something_else() -> None:
    class BadSwish(Swish):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return x * torch.sigmoid(2 * x)

    m = torch.nn.Sequential(BadSwish(8))
    report = torch_nki.swap(m)
    (entry,) = report.entries
    assert entry.kind == "Swish" and entry.status == "reverted" and "outputs differ" in entry.reason
    assert "forward" not in m[0].__dict__


@pytest.mark.usefixtures("registered", "dynamo")
def test_a_registered_pattern_is_rewritten_and_logged() -> None:
    def f(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
        return (torch.sigmoid(x) * x) @ w

    x, w = torch.randn(8, 16), torch.randn(16, 4)
    got = torch.compile(f, backend="nki", fullgraph=True)(x, w)
    torch.testing.assert_close(got, f(x, w), rtol=1e-5, atol=1e-5)
    log = {(d.pattern, d.rewritten) for d in compiler.last_log()}
    assert log == {("x * sigmoid(x)", True), ("matmul", True)}


@pytest.mark.usefixtures("dynamo")
def test_an_unregistered_pattern_is_not_applied() -> None:
    def f(x: torch.Tensor) -> torch.Tensor:
        return x * torch.sigmoid(x)

    torch.compile(f, backend="nki", fullgraph=True)(torch.randn(8, 16))
    assert compiler.last_log() == []


def test_the_built_in_kinds_and_patterns_are_registered_through_the_api() -> None:
    assert {a.kind for a in adapters.adapters()} >= {
        "RMSNorm",
        "OffsetRMSNorm",
        "Linear",
        "MLP",
        "GELU MLP",
        "Attention",
    }
    names = [p.name for p in compiler.patterns()]
    assert names[:2] == ["linear", "addmm"] and "gelu(a) * b" in names and names[-1] == "rotary"
    # A built-in goes away and comes back like any other.
    linear = torch_nki.unregister_adapter("Linear")
    try:
        assert torch_nki.swap(torch.nn.Sequential(torch.nn.Linear(4, 4))).entries == []
    finally:
        torch_nki.register_adapter(linear)


def test_bad_registrations_are_clear_errors() -> None:
    with pytest.raises(
        ValueError, match=r"register_adapter\('Linear'\): a kind of that name is already registered"
    ):
        torch_nki.register_adapter(
            SWISH.__class__("Linear", ("linear",), SWISH.recognise, SWISH.forward, SWISH.example)
        )
    with pytest.raises(
        torch_nki.UnknownOpError, match=r"register_adapter\('Fused'\): kernel 'fused_thing' is not"
    ):
        torch_nki.register_adapter(
            torch_nki.Adapter("Fused", ("fused_thing",), SWISH.recognise, SWISH.forward, SWISH.example)
        )
    with pytest.raises(TypeError, match=r"register_adapter\('Swish'\): kernels must be a non-empty tuple"):
        torch_nki.register_adapter(
            torch_nki.Adapter("Swish", (), SWISH.recognise, SWISH.forward, SWISH.example)
        )
    with pytest.raises(TypeError, match=r"register_pattern\('p'\): rewrite must be callable"):
        torch_nki.register_pattern(torch_nki.Pattern("p", ("silu",), None))  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"register_pattern\('rmsnorm'\): a pattern of that name"):
        torch_nki.register_pattern(torch_nki.Pattern("rmsnorm", ("rmsnorm",), _x_sigmoid_x))
    with pytest.raises(KeyError, match="no kind 'Nope'"):
        torch_nki.unregister_adapter("Nope")
    with pytest.raises(KeyError, match="no pattern 'nope'"):
        torch_nki.unregister_pattern("nope")

"""``torch_nki.swap(..., relayout=True)``: bias-free Linear weights stored K-major (the
transpose of a contiguous ``[K, N]``) so the swapped forward runs ``matmul`` on them without
per-call transposes; the same values and gradients as the default swap; tied weights and
weights with a bias left alone; the layout given back by unswap, the context manager and a
revert."""

from __future__ import annotations

import copy

import pytest
import torch

import torch_nki
from torch_nki import swapping
from torch_nki.adapters import Adapter, adapters, register_adapter
from torch_nki.hotspots import record_neuron_calls


class Tied(torch.nn.Module):
    """Two projections sharing one weight, then one with a bias and one without."""

    def __init__(self) -> None:
        super().__init__()
        self.a = torch.nn.Linear(48, 48, bias=False)
        self.b = torch.nn.Linear(48, 48, bias=False)
        self.b.weight = self.a.weight
        self.c = torch.nn.Linear(48, 40, bias=True)
        self.d = torch.nn.Linear(40, 24, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out: torch.Tensor = self.d(self.c(self.b(self.a(x))))
        return out


def _model() -> Tied:
    torch.manual_seed(0)
    return Tied()


def _k_major(p: torch.Tensor) -> bool:
    return not p.is_contiguous() and p.t().is_contiguous()


@pytest.fixture
def x() -> torch.Tensor:
    return torch.randn(2, 7, 48, generator=torch.Generator().manual_seed(1))


def test_only_untied_bias_free_weights_are_relaid_out_and_values_stay(x: torch.Tensor) -> None:
    model = _model()
    before = {n: (p, p.detach().clone()) for n, p in model.named_parameters()}
    report = torch_nki.swap(model, relayout=True)
    assert not report.reverted
    assert _k_major(model.d.weight)
    for name in ("a.weight", "c.weight", "c.bias"):
        assert dict(model.named_parameters())[name].is_contiguous(), name
    for name, (param, value) in before.items():
        now = dict(model.named_parameters())[name]
        assert now is param, f"{name}: the Parameter object is kept"
        assert torch.equal(now.detach(), value), name


def test_the_relaid_weight_runs_matmul_with_the_default_swaps_values(x: torch.Tensor) -> None:
    plain, relaid = _model(), _model()
    torch_nki.swap(plain)
    torch_nki.swap(relaid, relayout=True)
    with torch.no_grad(), record_neuron_calls() as calls:
        got = relaid(x)
    with torch.no_grad():
        want = plain(x)
    ops = [op for op, _ in calls]
    assert ops == ["linear", "linear", "linear", "matmul"], ops
    torch.testing.assert_close(got, want, rtol=1e-6, atol=1e-6)


def test_a_training_step_has_the_default_swaps_gradients(x: torch.Tensor) -> None:
    plain, relaid = _model(), _model()
    torch_nki.swap(plain)
    torch_nki.swap(relaid, relayout=True)
    for m in (plain, relaid):
        m(x).square().mean().backward()
    for (name, p), q in zip(plain.named_parameters(), relaid.parameters(), strict=True):
        assert p.grad is not None and q.grad is not None, name
        torch.testing.assert_close(q.grad, p.grad, rtol=1e-5, atol=1e-6, msg=name)


def test_unswap_and_the_context_manager_give_the_layout_back(x: torch.Tensor) -> None:
    model = _model()
    value = model.d.weight.detach().clone()
    torch_nki.swap(model, relayout=True)
    assert _k_major(model.d.weight)
    assert torch_nki.unswap(model) == 4
    assert model.d.weight.is_contiguous() and torch.equal(model.d.weight.detach(), value)
    with torch_nki.swapped(model, relayout=True):
        assert _k_major(model.d.weight)
    assert model.d.weight.is_contiguous() and torch.equal(model.d.weight.detach(), value)


def test_the_default_swap_leaves_every_parameter_as_it_was() -> None:
    model = _model()
    torch_nki.swap(model)
    assert all(p.is_contiguous() for p in model.parameters())


def test_a_reverted_instance_gets_its_layout_back(monkeypatch: pytest.MonkeyPatch) -> None:
    model = _model()
    monkeypatch.setattr(swapping, "_check", lambda *_: (False, "forced to fail", None))
    report = torch_nki.swap(model, relayout=True)
    assert len(report.reverted) == 4
    assert all(p.is_contiguous() for p in model.parameters())


def test_a_weight_the_user_stored_k_major_runs_matmul(x: torch.Tensor) -> None:
    model = _model()
    torch_nki.swap(model)
    want = model(x).detach()
    model.d.weight.data = model.d.weight.data.t().contiguous().t()
    with torch.no_grad(), record_neuron_calls() as calls:
        got = model(x)
    assert [op for op, _ in calls][-1] == "matmul"
    torch.testing.assert_close(got, want, rtol=1e-6, atol=1e-6)
    # Copies keep the layout and the swap.
    copied = copy.deepcopy(model)
    assert _k_major(copied.d.weight)


def test_k_major_must_be_callable() -> None:
    linear = next(a for a in adapters() if a.kind == "Linear")
    bad = Adapter(
        "Linear2",
        linear.kernels,
        linear.recognise,
        linear.forward,
        linear.example,
        k_major="weight",  # type: ignore[arg-type]
    )
    with pytest.raises(TypeError, match=r"register_adapter\('Linear2'\): k_major must be callable"):
        register_adapter(bad)

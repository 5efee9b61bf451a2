"""Profile → swap → verify → revert on a real transformers model (``LlamaForCausalLM`` from a
small config, random weights, no downloads): hotspots ranked and matched, every RMSNorm, linear,
MLP and attention instance swapped and verified, logits and gradients as the original's,
instance-only swaps that survive dtype changes, state-dict round trips and deep copies, and
failures reverted with the reason."""

from __future__ import annotations

import copy
import json

import pytest
import torch

import torch_nki

from refs import tiny_llama

pytest.importorskip("transformers")


@pytest.fixture(scope="module")
def ids() -> torch.Tensor:
    return torch.randint(0, 128, (2, 17), generator=torch.Generator().manual_seed(3))


def kinds(model: torch.nn.Module) -> dict[str, int]:
    """How many instances of each swappable kind the model has, by structure."""
    counts = {"RMSNorm": 0, "Linear": 0, "MLP": 0, "Attention": 0}
    for m in model.modules():
        name = type(m).__name__
        if isinstance(m, torch.nn.Linear):
            counts["Linear"] += 1
        elif name.endswith("RMSNorm"):
            counts["RMSNorm"] += 1
        elif name.endswith("MLP"):
            counts["MLP"] += 1
        elif name.endswith("Attention"):
            counts["Attention"] += 1
    return counts


def test_profile_ranks_and_matches_hotspots(ids: torch.Tensor) -> None:
    model = tiny_llama()
    report = torch_nki.profile(model, ids, steps=2)
    # Ranked by estimated Trn2 time (rows without an estimate last), CPU self time beside it.
    device = [-1.0 if h.device_total_us is None else h.device_total_us for h in report.modules]
    assert device == sorted(device, reverse=True)
    assert all(h.device_source for h in report.modules if h.device_total_us is not None)
    assert abs(sum(h.share for h in report.modules) - 1.0) < 1e-6
    assert abs(sum(h.device_share for h in report.modules) - 1.0) < 1e-6
    by_kind: dict[str, int] = {}
    for h in report.matched:
        kind = h.kernel.split(":")[0] if h.kernel else ""
        by_kind[kind] = by_kind.get(kind, 0) + 1
        assert h.device_us is not None and h.device_us > 0, h
    assert by_kind == kinds(model)
    unmatched = [h for h in report.modules if h.kernel is None]
    assert all(h.reason for h in unmatched)
    mm = [h for h in report.ops if h.name == "aten::mm"]
    assert mm and all(h.kernel == "matmul" for h in mm)
    doc = json.loads(report.to_json())
    assert doc["model"] == "LlamaForCausalLM" and len(doc["modules"]) == len(report.modules)
    assert "| # | name |" in report.to_markdown()
    assert set(report.captured) >= {h.name for h in report.matched}


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=["f32", "bf16"])
def test_swap_verifies_every_instance_and_keeps_the_logits(ids: torch.Tensor, dtype: torch.dtype) -> None:
    model = tiny_llama().to(dtype)
    with torch.no_grad():
        before = model(ids).logits
    report = torch_nki.profile(model, ids, steps=1)
    swapped = torch_nki.swap(model, report)
    assert not swapped.reverted, swapped.to_markdown()
    counts: dict[str, int] = {}
    for e in swapped.swapped:
        assert e.status == "swapped", e
        counts[e.kind] = counts.get(e.kind, 0) + 1
    assert counts == kinds(model)
    with torch.no_grad():
        after = model(ids).logits
    tol = {"rtol": 1e-4, "atol": 1e-4} if dtype == torch.float32 else {"rtol": 5e-2, "atol": 5e-2}
    torch.testing.assert_close(after, before, **tol)
    assert torch_nki.unswap(model) == len(swapped.swapped)
    with torch.no_grad():
        assert torch.equal(model(ids).logits, before), "unswap must restore the original exactly"
    assert all("forward" not in m.__dict__ for m in model.modules())


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=["f32", "bf16"])
def test_a_training_step_has_the_original_gradients(ids: torch.Tensor, dtype: torch.dtype) -> None:
    original, model = tiny_llama().to(dtype), tiny_llama().to(dtype)
    torch_nki.swap(model, torch_nki.profile(model, ids, steps=1))
    for m in (original, model):
        m.train()
        m(ids, labels=ids).loss.backward()
    grads = dict(original.named_parameters())
    for name, p in model.named_parameters():
        want = grads[name].grad
        assert p.grad is not None and want is not None, name
        if dtype == torch.float32:
            torch.testing.assert_close(p.grad, want, rtol=1e-3, atol=1e-5, msg=name)
        else:
            # bf16 rounds each kernel's output where eager rounds each ATen op's: compare each
            # gradient norm-wise, relative to its largest element.
            error = (p.grad.float() - want.float()).abs().max()
            assert error <= 3e-2 * want.float().abs().max(), f"{name}: max abs error {error}"


def test_swaps_are_per_instance_idempotent_and_survive_copies(ids: torch.Tensor) -> None:
    model, other = tiny_llama(), tiny_llama()
    report = torch_nki.profile(model, ids, steps=1)
    first = torch_nki.swap(model, report)
    assert all("forward" not in m.__dict__ for m in other.modules()), "another instance was touched"
    again = torch_nki.swap(model, report)
    assert {e.status for e in again.entries} == {"already swapped"}
    assert len(again.entries) == len(first.entries)
    with torch.no_grad():
        want = model(ids).logits
        clone = copy.deepcopy(model)
        torch.testing.assert_close(clone(ids).logits, want)
        assert clone.model.norm.forward.__self__ is clone.model.norm
        fresh = tiny_llama(seed=5)
        torch_nki.swap(fresh)
        fresh.load_state_dict(model.state_dict())
        torch.testing.assert_close(fresh(ids).logits, want)
        half = model.to(torch.bfloat16)
        torch.testing.assert_close(half(ids).logits.float(), want, rtol=5e-2, atol=5e-2)


def test_failed_verification_is_reverted_with_the_reason(ids: torch.Tensor) -> None:
    class ScaledRMSNorm(torch.nn.Module):
        """RMSNorm-shaped, but its forward triples the result: no kernel can stand in (doubled,
        with a weight of ones, it would be an offset RMSNorm, ``x̂ · (1 + weight)``)."""

        def __init__(self, d: int) -> None:
            super().__init__()
            self.weight = torch.nn.Parameter(torch.ones(d))
            self.variance_epsilon = 1e-6

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return 3 * x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.variance_epsilon) * self.weight

    model = torch.nn.Sequential(ScaledRMSNorm(64))
    x = torch.randn(3, 64)
    report = torch_nki.swap(model, torch_nki.profile(model, x, steps=1))
    (entry,) = report.entries
    assert entry.status == "reverted" and "outputs differ" in entry.reason
    assert "forward" not in model[0].__dict__
    torch.testing.assert_close(model(x), ScaledRMSNorm(64)(x))


def test_contract_rejections_are_reasons_and_nothing_matching_is_an_empty_plan() -> None:
    wide = torch.nn.RMSNorm(16385, eps=1e-6)
    report = torch_nki.profile(wide, torch.randn(2, 16385), steps=1)
    (row,) = report.modules
    assert row.kernel is None and "requires D <= 16384" in row.reason
    conv = torch.nn.Sequential(torch.nn.Conv1d(3, 4, 3), torch.nn.ReLU())
    report = torch_nki.profile(conv, torch.randn(1, 3, 8), steps=1)
    assert not report.matched
    assert torch_nki.swap(conv, report).entries == []


def test_an_empty_batch_profiles_and_steps_must_be_positive() -> None:
    model = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.RMSNorm(8))
    report = torch_nki.profile(model, torch.randn(0, 8), steps=1)
    rows = {row.name: row for row in report.modules}
    assert rows["0"].kernel == "Linear: linear, matmul"
    # The kernel's cost estimate cannot trace an empty tile: a reason, not a crash.
    assert rows["1"].kernel is None and "empty dimension" in rows["1"].reason, rows["1"]
    for steps in (0, -1):
        with pytest.raises(ValueError, match=f"steps must be at least 1, got {steps}"):
            torch_nki.profile(model, torch.randn(2, 8), steps=steps)


def test_the_context_manager_restores_what_it_swapped(ids: torch.Tensor) -> None:
    model = tiny_llama()
    with torch.no_grad():
        want = model(ids).logits
    with torch_nki.swapped(model) as report:
        # No report: every instance verified on inputs generated from its parameters.
        assert report.swapped and not report.reverted, report.to_markdown()
        assert all(e.status == "swapped" and "generated inputs" in e.reason for e in report.entries)
        assert {e.kind for e in report.entries} == {"RMSNorm", "Linear", "MLP", "Attention"}
        assert "forward" in model.lm_head.__dict__
        with torch.no_grad():
            torch.testing.assert_close(model(ids).logits, want, rtol=1e-4, atol=1e-4)
    assert all("forward" not in m.__dict__ for m in model.modules())
    with torch_nki.swapped(model, verify=False) as report:
        assert all(e.status == "swapped, not verified" for e in report.entries)


class _ImpostorRMSNorm(torch.nn.Module):
    """RMSNorm-shaped, but scaled by ``2 + weight``: neither an RMSNorm (``x̂ · weight``) nor an
    offset one (Gemma's ``x̂ · (1 + weight)``), so no kernel can stand in."""

    def __init__(self, d: int) -> None:
        super().__init__()
        self.weight = torch.nn.Parameter(torch.zeros(d))
        self.eps = 1e-6
        self.fail = False

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.fail:
            raise RuntimeError("this module fails on a later call")
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * (2 + self.weight)


def test_a_swap_without_a_report_reverts_what_disagrees_on_generated_inputs() -> None:
    model = torch.nn.Sequential(torch.nn.Linear(16, 16), _ImpostorRMSNorm(16))
    x = torch.randn(3, 16)
    with torch.no_grad():
        want = model(x)
    report = torch_nki.swap(model)
    entries = {e.name: e for e in report.entries}
    assert entries["0"].status == "swapped" and "generated inputs" in entries["0"].reason
    assert entries["1"].status == "reverted" and "outputs differ" in entries["1"].reason
    assert "forward" not in model[1].__dict__
    with torch.no_grad():
        torch.testing.assert_close(model(x), want)  # nothing changed the output silently
    torch_nki.unswap(model)


def test_any_exception_while_verifying_reverts_that_instance() -> None:
    norm = _ImpostorRMSNorm(16)
    model = torch.nn.Sequential(torch.nn.Linear(16, 16), norm)
    x = torch.randn(3, 16)
    profiled = torch_nki.profile(model, x, steps=1)
    norm.fail = True  # its forward raises from now on: the verification's call of the original
    report = torch_nki.swap(model, profiled)
    entries = {e.name: e for e in report.entries}
    assert entries["1"].status == "reverted"
    assert entries["1"].reason == "verifying it raised RuntimeError: this module fails on a later call"
    assert "forward" not in norm.__dict__ and entries["0"].status == "swapped"
    torch_nki.unswap(model)
    # A model on the meta device: verification cannot read a value; reverted, not half swapped.
    meta = torch.nn.Sequential(torch.nn.Linear(16, 16), torch.nn.RMSNorm(16, eps=1e-6)).to("meta")
    report = torch_nki.swap(meta)
    assert [e.status for e in report.entries] == ["reverted", "reverted"], report.to_markdown()
    assert all(e.reason.startswith("verifying it raised ") for e in report.entries)
    assert all("forward" not in m.__dict__ for m in meta.modules())


def test_an_exception_escaping_swap_leaves_the_model_as_it_was(monkeypatch: pytest.MonkeyPatch) -> None:
    from torch_nki import swapping

    model = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.Linear(8, 8), torch.nn.Linear(8, 8))
    checked: list[str] = []
    real = swapping._check

    def interrupted(module: torch.nn.Module, *args: object) -> tuple[bool, str, float | None]:
        if len(checked) == 2:
            raise KeyboardInterrupt
        checked.append(type(module).__name__)
        return real(module, *args)  # type: ignore[arg-type]

    monkeypatch.setattr(swapping, "_check", interrupted)
    with pytest.raises(KeyboardInterrupt):
        torch_nki.swap(model)
    assert checked == ["Linear", "Linear"]
    assert all("forward" not in m.__dict__ and swapping._STATE not in m.__dict__ for m in model.modules())


def test_the_cli_runs_the_workflow_and_writes_the_report(tmp_path: object) -> None:
    from pathlib import Path

    from torch_nki import cli

    out = Path(str(tmp_path)) / "report.md"
    assert cli.main(["swap", "--model", "llama-tiny", "--report", str(out)]) == 0
    text = out.read_text()
    assert "reverted 0" in text and "| Attention |" in text and "![before and after](report.png)" in text
    assert out.with_suffix(".png").stat().st_size > 1000
    assert "## Whole-model ratios" in text and "llama-tiny  train step f32" in text
    assert cli.main(["swap", "--model", "gpt-99"]) == 2

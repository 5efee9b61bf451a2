"""``torch_nki.model_bench``: the whole-model table's structure on the tiny Llama with few
iterations (the ratios' values are the benchmark's business, not the tests')."""

from __future__ import annotations

import math

import pytest

from torch_nki import cli, model_bench, workflow


def test_the_tiny_llama_gets_finite_ratios_idle_and_busy() -> None:
    lines: list[str] = []
    rows = model_bench.measure(
        ["llama-tiny"],
        [("forward", "bf16", 1.2), ("train step", "f32", 1.5)],
        n_busy=1,
        repeat=1,
        out=lines.append,
    )
    assert [(r.case, r.dtype, r.machine) for r in rows] == [
        ("forward", "bf16", "as it is"),
        ("forward", "bf16", "1 busy"),
        ("train step", "f32", "as it is"),
        ("train step", "f32", "1 busy"),
    ]
    for r in rows:
        assert r.unswapped_ms > 0 and r.swapped_ms > 0 and math.isfinite(r.ratio)
    assert len(lines) == len(rows) and all("load average" in line for line in lines)


def test_the_presets_include_the_512_llama() -> None:
    assert set(model_bench.MODELS) <= set(workflow.MODELS)
    model, ids = workflow.build("llama-512", workflow.NKI_TO_TORCH["f32"])
    assert model.config.hidden_size == 512 and model.config.num_hidden_layers == 4
    assert tuple(ids.shape) == (2, 128)


def test_an_unknown_model_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    assert model_bench.run(models=["gpt-99"]) == 2
    assert "unknown model gpt-99" in capsys.readouterr().out


def test_the_cli_takes_the_models_options(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[tuple[object, ...]] = []
    monkeypatch.setattr(model_bench, "print_ratios", lambda *a, **k: seen.append(a) or [])
    assert cli.main(["bench", "--models", "--busy", "2", "--threads", "1"]) == 0
    assert seen == [(model_bench.MODELS, 2, 9, 1)]

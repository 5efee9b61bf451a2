"""``torch_nki.model_ops`` (``torch-nki bench --by-op``): the per-op table's structure on the
tiny Llama with one profiled step (the times' values are the benchmark's business)."""

from __future__ import annotations

import pytest

from torch_nki import cli, model_ops


def test_the_swapped_side_runs_neuron_ops_where_the_unswapped_runs_aten() -> None:
    result = model_ops.measure("llama-tiny", "f32", train=False, steps=1, warm_up=1)
    assert result.case == "forward" and result.steps == 1
    assert any(op.startswith("neuron::") for op in result.swapped)
    assert not any(op.startswith("neuron::") for op in result.unswapped)
    assert "aten::mm" in result.unswapped
    for times in (result.unswapped, result.swapped):
        values = list(times.values())
        assert values == sorted(values, reverse=True) and all(v >= 0 for v in values)
    assert result.unswapped_wall_ms > 0 and result.swapped_wall_ms > 0
    lines = result.lines(top=3)
    # Title, header, three rows, the two totals.
    assert len(lines) == 7 and "llama-tiny forward f32" in lines[0]
    assert lines[-1].startswith("wall time per step") and f"ratio {result.ratio:.2f}x" in lines[-1]


def test_a_training_step_is_profiled_with_its_backward() -> None:
    result = model_ops.measure("llama-tiny", "f32", train=True, steps=1, warm_up=1)
    assert result.case == "train step"
    assert any(op.startswith("neuron::") and "backward" in op for op in result.swapped)


def test_bad_arguments_are_refused(capsys: pytest.CaptureFixture[str]) -> None:
    assert model_ops.run("gpt-99") == 2
    assert "unknown model gpt-99" in capsys.readouterr().out
    assert model_ops.run("llama-tiny", "f16") == 2
    assert "f32 or bf16, not f16" in capsys.readouterr().out
    with pytest.raises(ValueError, match="steps must be at least 1, got 0"):
        model_ops.measure("llama-tiny", steps=0)


def test_the_cli_takes_the_by_op_options(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[tuple[object, ...]] = []
    monkeypatch.setattr(model_ops, "run", lambda *a: seen.append(a) or 0)
    assert cli.main(["bench", "--by-op", "llama-512", "--train", "--threads", "1"]) == 0
    assert cli.main(["bench", "--by-op", "llama-tiny", "--dtype", "bf16", "--repeat", "20"]) == 0
    assert seen == [("llama-512", "f32", True, 12, 1), ("llama-tiny", "bf16", False, 20, None)]

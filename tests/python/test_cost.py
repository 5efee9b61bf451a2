"""``torch_nki.cost`` and ``torch-nki cost``: the cost model's estimate for every op with a
reference, at its largest declared sample, on every target (iterates the registry)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

import torch_nki
from torch_nki import cli, testing
from torch_nki._dtypes import INDEX_DOWNCAST


def _largest(op: str) -> testing.SampleInput:
    samples = testing.sample_inputs(op, dtypes=[torch.float32])
    return max(samples, key=lambda s: sum(t.numel() for t in s.tensors))


@pytest.mark.parametrize("target", ["trn1", "trn2", "trn3"])
@pytest.mark.parametrize("op", testing.ops_with_reference())
def test_every_op_gets_an_estimate(op: str, target: str) -> None:
    sample = _largest(op)
    meta = [a.to("meta") if isinstance(a, torch.Tensor) else a for a in sample.args]
    report = torch_nki.cost(op, *meta, target=target)
    assert report.op == op and report.target == target
    assert report.total_ns > 0 and report.instructions > 0
    assert report.bound in {"dma", "tensor", "vector", "scalar"}
    assert 0 < report.roofline_fraction <= 1.0 + 1e-9
    # Moving each tensor once is a lower bound on the traffic, so the HBM roofline fraction
    # is at most the DMA resource's.
    assert 0 < report.hbm_compulsory_bytes <= report.hbm_read_bytes + report.hbm_write_bytes
    assert 0 < report.hbm_roofline_fraction <= report.min_ns["dma"] / report.total_ns + 1e-9
    kernel_dtypes = [INDEX_DOWNCAST.get(t.dtype, t.dtype) for t in sample.tensors]
    assert report.hbm_read_bytes >= sum(
        t.numel() * d.itemsize for t, d in zip(sample.tensors, kernel_dtypes, strict=True)
    )
    assert all(0 <= report.utilisation(e) <= 1.0 + 1e-9 for e in report.busy_ns)
    assert "estimate, not a measurement" in str(report)
    events = [e for e in json.loads(report.trace_json)["traceEvents"] if e["ph"] == "X"]
    # One event per instruction: a DMA transfer on the first DMA engine it spans, naming how many.
    assert len(events) == report.instructions
    assert all(1 <= e["args"]["dma_engines"] <= 16 for e in events if e["cat"].startswith("dma"))


def test_real_and_meta_tensors_cost_the_same() -> None:
    x, w = torch.ones(300, 1000), torch.ones(1000)
    a = torch_nki.cost("rmsnorm", x, w)
    b = torch_nki.cost("rmsnorm", x.to("meta"), w.to("meta"), eps=1e-6)
    assert a.total_ns == b.total_ns


def test_contract_errors_and_unknown_targets() -> None:
    with pytest.raises(torch_nki.ContractShapeError, match="weight has shape"):
        torch_nki.cost("rmsnorm", torch.empty(4, 8, device="meta"), torch.empty(9, device="meta"))
    with pytest.raises(ValueError, match="unknown target `trn9`"):
        torch_nki.cost("add", torch.ones(2), torch.ones(2), target="trn9")
    with pytest.raises(torch_nki.UnknownOpError, match="no kernel named `no_such_op`") as unknown:
        torch_nki.cost("no_such_op")
    assert isinstance(unknown.value, KeyError) and isinstance(unknown.value, torch_nki.NkiError)
    assert str(unknown.value).startswith("no kernel named `no_such_op` (registered: ")


def test_misspelled_keyword_arguments_are_errors() -> None:
    q = torch.empty(1, 2, 128, 64, device="meta")
    wrong = r"neuron::flash_attention: unknown argument casual \(parameters: q, k, v, "
    with pytest.raises(TypeError, match=wrong):
        torch_nki.cost("flash_attention", q, q, q, casual=True)
    with pytest.raises(TypeError, match="unknown argument casual"):
        torch_nki.emit("flash_attention", q, q, q, casual=True)
    x, w = torch.empty(4, 8, device="meta"), torch.empty(8, device="meta")
    with pytest.raises(TypeError, match="neuron::rmsnorm: given twice argument x"):
        torch_nki.cost("rmsnorm", x, w, x=x)
    # As the op itself does (torch checks the schema there).
    with pytest.raises(TypeError, match="unknown argument epsilon"):
        torch_nki.cost("rmsnorm", x, w, epsilon=1e-5)
    with pytest.raises(RuntimeError, match="Unknown keyword argument 'epsilon'"):
        torch.ops.neuron.rmsnorm(torch.ones(4, 8), torch.ones(8), epsilon=1e-5)


def test_cli_usage_errors_print_one_line_and_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rms = ["--shape", "weight=4"]
    bad_eps = "--scalar eps: expected a number"
    cases = {
        ("cost", "rmsnorm", "--shape", "x=8xa", *rms): "torch-nki cost: --shape x: expected sizes like 8x4",
        ("cost", "rmsnorm", "--shape", "x=-1x4", *rms): "torch-nki cost: --shape x: expected sizes like 8x4",
        ("cost", "rmsnorm", "--shape", "x=8x4", *rms, "--scalar", "eps=abc"): bad_eps,
        ("emit", "rmsnorm", "--shape", "x"): "torch-nki emit: --shape takes NAME=VALUE, got 'x'",
        ("emit", "nope"): "torch-nki emit: no kernel named `nope`",
        ("emit", "rmsnorm", "--shape", "x=8x4", *rms, "-o", str(tmp_path / "no" / "t.py")): (
            "torch-nki emit: cannot write"
        ),
        ("cost", "rmsnorm", "--shape", "x=8x4", *rms, "--trace", str(tmp_path / "no" / "t.json")): (
            "torch-nki cost: "
        ),
        ("--load", str(tmp_path) + "=my-ns", "list"): "error: torch_nki.load: namespace 'my-ns'",
        ("cost", "gelu", "--shape", "x=4x4", "--scalar", "approximate=bogus"): (
            'torch-nki cost: neuron::gelu: argument approximate must be one of "none", "tanh", got "bogus"'
        ),
        ("emit", "gelu", "--shape", "x=4x4", "--scalar", "approximate=bogus"): (
            'torch-nki emit: neuron::gelu: argument approximate must be one of "none", "tanh", got "bogus"'
        ),
        ("cost", "rmsnorm", "--shape", "x=99999999999999999999x4", *rms): (
            "torch-nki cost: --shape x: 99999999999999999999x4 has 399999999999999999996 elements, more "
            "than a tensor can hold (2**63 - 1)"
        ),
        ("emit", "add", "--shape", "x=4294967296x4294967296x4", "--shape", "y=4x4"): (
            "torch-nki emit: --shape x: 4294967296x4294967296x4 has 73786976294838206464 elements"
        ),
        ("cost", "add", "--shape", "x=4611686018427387904x1", "--shape", "y=1x1"): (
            "torch-nki cost: --shape x: 4611686018427387904x1 is too large: Storage size calculation "
            "overflowed"
        ),
    }
    for argv, message in cases.items():
        assert cli.main(list(argv)) == 2, argv
        out = capsys.readouterr().out
        assert message in out, (argv, out)
        assert out.count("\n") == 1 or "--trace" in argv, (argv, out)  # one line (after the report)
    for command in (["bench", "--op", "add"], ["demo"]):
        with pytest.raises(SystemExit) as usage:
            cli.main([*command, "--repeat", "0"])
        assert usage.value.code == 2
        assert "expected a whole number of at least 1, got '0'" in capsys.readouterr().err


def test_cli_cost_prints_the_estimate_and_writes_a_trace(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    trace = tmp_path / "t.json"
    argv = ["cost", "rmsnorm", "--shape", "x=256x1024", "--shape", "weight=1024", "--trace", str(trace)]
    assert cli.main(argv) == 0
    out = capsys.readouterr().out
    assert out.startswith("rmsnorm on trn2 (estimate, not a measurement): ")
    assert "roofline fraction" in out and str(trace) in out
    assert json.loads(trace.read_text())["traceEvents"]
    assert cli.main(["cost", "rmsnorm", "--shape", "x=8x4"]) == 2
    assert "give the shape of `weight`" in capsys.readouterr().out
    assert (
        cli.main(["cost", "rmsnorm", "--shape", "x=8x4", "--shape", "weight=4", "--scalar", "bogus=1"]) == 2
    )
    assert "has no parameter bogus" in capsys.readouterr().out


def test_hbm_roofline_counts_each_tensor_once() -> None:
    # add reads x and y and writes the sum once: its compulsory bytes are its traffic.
    x = torch.empty(512, 1024, device="meta")
    add = torch_nki.cost("add", x, x)
    assert add.hbm_compulsory_bytes == 3 * x.numel() * 4
    assert add.hbm_compulsory_bytes == add.hbm_read_bytes + add.hbm_write_bytes
    assert add.hbm_roofline_fraction == pytest.approx(add.min_ns["dma"] / add.total_ns)
    # rmsnorm: x, weight, y and the rstd [rows] it saves for its backward.
    w = torch.empty(1024, device="meta")
    rms = torch_nki.cost("rmsnorm", x, w)
    assert rms.hbm_compulsory_bytes == (2 * x.numel() + w.numel() + x.shape[0]) * 4
    assert "HBM roofline (each tensor moved once" in str(rms)


def test_cli_cost_gives_single_dtype_parameters_their_dtype_and_reports_contract_errors(
    capsys: pytest.CaptureFixture[str],
) -> None:
    # mean and rstd are f32 only: --dtype bf16 applies to the other tensors.
    shapes = ["grad_y=256x512", "x=256x512", "weight=512", "mean=256", "rstd=256"]
    argv = ["cost", "layernorm_backward", *[a for s in shapes for a in ("--shape", s)], "--dtype", "bf16"]
    assert cli.main(argv) == 0
    assert capsys.readouterr().out.startswith("layernorm_backward on trn2")
    # Class targets are i32 in the kernel and int64 for callers.
    argv = ["cost", "cross_entropy", "--shape", "logits=64x1000", "--shape", "target=64"]
    assert cli.main(argv) == 0
    capsys.readouterr()
    # A contract violation is a message and exit code 2, not a traceback.
    argv = ["cost", "rmsnorm", "--shape", "x=8x4", "--shape", "weight=5"]
    assert cli.main(argv) == 2
    out = capsys.readouterr().out
    assert out.startswith("torch-nki cost: ") and "weight has shape" in out
    argv = ["emit", "rmsnorm", "--shape", "x=8x4", "--shape", "weight=5"]
    assert cli.main(argv) == 2
    assert capsys.readouterr().out.startswith("torch-nki emit: ")


def test_plot_draws_every_track_and_the_roofline(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from matplotlib import image

    from torch_nki._plot import _tracks

    report = torch_nki.cost(
        "rmsnorm", torch.empty(512, 1024, device="meta"), torch.empty(1024, device="meta")
    )
    tracks = _tracks(report.trace_json)
    # One row per track with slices, every instruction on one of them (a transfer on its first
    # DMA engine's row; the other engines it keeps busy count in busy_ns).
    assert sum(len(spans) for _, spans in tracks) == report.instructions
    assert "dma0" in {name for name, _ in tracks} <= set(report.busy_ns)
    assert set(report.min_ns) == {"dma", "tensor", "vector", "scalar", "gpsimd"}
    png = tmp_path / "r.png"
    argv = ["cost", "rmsnorm", "--shape", "x=512x1024", "--shape", "weight=1024", "--plot", str(png)]
    assert cli.main(argv) == 0
    assert f"plot: {png}" in capsys.readouterr().out
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    height, width, _ = image.imread(png).shape
    assert width == 1100 and height > 300


def test_plot_without_matplotlib_names_the_package(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    report = torch_nki.cost("add", torch.empty(4, 4, device="meta"), torch.empty(4, 4, device="meta"))
    with pytest.raises(ImportError, match=r"pip install 'torch-nki\[plot\]'"):
        report.write_plot(tmp_path / "a.png")
    argv = ["cost", "add", "--shape", "x=4x4", "--shape", "y=4x4", "--plot", str(tmp_path / "a.png")]
    assert cli.main(argv) == 2
    assert "needs matplotlib" in capsys.readouterr().out
    assert not (tmp_path / "a.png").exists()


def test_every_op_with_a_reference_declares_a_bench_shape() -> None:
    for op in testing.ops_with_reference():
        sample = testing.bench_input(op, make=testing.meta)
        assert sample is not None, f"{op} declares no bench(...)"
        torch_nki.cost(op, *sample.args)  # the contract admits it and it validates on trn2


def test_cli_bench_grades_an_op(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["bench", "--op", "add", "--repeat", "1"]) == 0
    out = capsys.readouterr().out
    row = next(line for line in out.splitlines() if line.startswith("add "))
    assert "8192x4096" in row and "dma" in row and row.rstrip().endswith("x")
    assert "cost-model estimates" in out
    assert "large outputs" in out.splitlines()[-1]
    assert cli.main(["bench", "--op", "no_such_op"]) == 2


@pytest.mark.parametrize(
    ("value", "on"),
    [
        (None, False),
        ("", False),
        ("0", False),
        ("yes", False),
        ("1", True),
        (" 2", True),
        ("-1", True),
        ("1x", True),
    ],
)
def test_bench_reads_thp_mem_alloc_enable_as_torch_does(value: str | None, on: bool) -> None:
    from torch_nki import bench

    assert bench._torch_thp_enabled(value) is on


def test_bench_names_how_each_side_backs_its_outputs(tmp_path: Path) -> None:
    """The note follows TORCH_NKI_HUGE_PAGES (read once per process, hence the subprocess),
    THP_MEM_ALLOC_ENABLE and the kernel's transparent huge page mode."""
    thp_modes = tmp_path
    (thp_modes / "madvise").write_text("always [madvise] never\n")
    (thp_modes / "never").write_text("always madvise [never]\n")
    script = (
        "import torch_nki; from torch_nki import bench, _native; "
        f"print(_native.huge_pages()); print(bench.allocation_note({str(thp_modes / 'madvise')!r}))"
    )
    env = {**os.environ, "TORCH_NKI_HUGE_PAGES": "0", "THP_MEM_ALLOC_ENABLE": "1"}
    done = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, check=True)
    advised, note = done.stdout.splitlines()
    assert advised == "False"
    assert "by 4 KiB pages (TORCH_NKI_HUGE_PAGES=0) for the simulator" in note
    assert "by huge pages (THP_MEM_ALLOC_ENABLE set) for ATen" in note
    # This process: the advice is on unless switched off, as the docs say.
    from torch_nki import _native, bench

    assert _native.huge_pages() is (os.environ.get("TORCH_NKI_HUGE_PAGES", "").strip() != "0")
    ours = "huge pages" if _native.huge_pages() else "4 KiB pages (TORCH_NKI_HUGE_PAGES=0)"
    assert f"backed by {ours} for the simulator" in bench.allocation_note(str(thp_modes / "madvise"))
    # Without transparent huge pages (or where the kernel does not say), neither side has them.
    for path in (thp_modes / "never", thp_modes / "missing"):
        assert "4 KiB pages on both sides" in bench.allocation_note(str(path))
    # Every way, the note says the simulator's outputs are faulted in ahead where that is done.
    for path in (thp_modes / "madvise", thp_modes / "never"):
        ahead = bench.allocation_note(str(path)).endswith("; the simulator's are faulted in before each run")
        assert ahead is sys.platform.startswith("linux")
    assert note.endswith("faulted in before each run") is sys.platform.startswith("linux")


def test_backward_kernels_are_graded_at_their_forwards_bench_shape() -> None:
    """Derived from the forward's bench shape (costed here, on meta tensors: the forward runs
    on its contract's output shapes; timing is `torch-nki bench`'s job)."""
    for op in testing.backward_kernels():
        samples = testing.bench_inputs(op, make=testing.meta)
        assert samples is not None, op
        sample, forward = samples
        assert forward is not None and forward.op == testing.op_spec(op).backward_of
        assert sample.op == op and forward.tensors[0].shape in [t.shape for t in sample.tensors]
        assert all(t.is_meta for t in sample.tensors), op
        assert torch_nki.cost(op, *sample.args).total_ns > 0
    # A forward op is its own bench call, with no forward behind it.
    forward_only = testing.bench_inputs("add", make=testing.meta)
    assert forward_only is not None and forward_only[1] is None


def test_bench_times_a_backward_kernel_against_the_gradients_it_computes() -> None:
    """What `torch-nki bench` times a backward kernel against, torch autograd of its forward's
    reference, gives the kernel's own gradients (on each forward's first fp32 sample)."""
    from torch_nki import bench

    for op in testing.backward_kernels():
        spec = testing.op_spec(op)
        forward = testing.sample_inputs(spec.backward_of or "", dtypes=[torch.float32])[0]
        backward = testing.backward_sample(forward)
        aten = bench._aten_backward(forward, backward)()
        fwd = testing.op_spec(forward.op)
        differentiable = [
            p.name
            for p, a in zip(fwd.params, forward.args, strict=True)
            if isinstance(a, torch.Tensor) and a.is_floating_point()
        ]
        expected = dict(zip(differentiable, aten, strict=True))
        ours = testing.call(backward)
        assert len(ours) == len(expected), op
        for output, grad in zip(spec.public_outputs, ours, strict=True):
            name = output.name.removeprefix("grad_")
            torch.testing.assert_close(grad, expected[name], rtol=1e-4, atol=1e-5, msg=f"{op}: {name}")

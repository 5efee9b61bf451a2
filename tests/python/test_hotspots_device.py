"""The hotspot profile ranks by estimated Trn2 device time next to CPU time: rows a kernel takes
use the cost model, other ATen ops the roofline (``torch_nki.roofline``, numbers checked here by
hand), and a host that reports ``neuron`` device time uses that instead (a synthetic event
list stands in for one)."""

from __future__ import annotations

import math
from typing import Any

import pytest
import torch
from torch.autograd import DeviceType  # type: ignore[attr-defined]
from torch.autograd.profiler_util import FunctionEvent

import torch_nki
from torch_nki import hotspots, roofline
from torch_nki.roofline import Arg

P = roofline.peaks("trn2")


def _us(flops: float, nbytes: float, itemsize: int) -> float:
    return max(flops / P.tensor_flops(itemsize), nbytes / P.hbm_bytes_per_s) * 1e6


def test_peaks_are_the_cost_models_table() -> None:
    # 128 x 128 MACs per cycle at the tensor clock (fp32 a quarter) on each of the two cores of
    # a Trn2 logical NeuronCore; every DMA queue's bandwidth.
    assert P.tensor_flops_32 == pytest.approx(P.tensor_flops_16 / 4)
    assert P.tensor_flops_16 == pytest.approx(2 * 2 * 128 * 128 * 2.4e9)
    assert P.hbm_bytes_per_s > 1e11
    with pytest.raises(ValueError, match="unknown target `trn9`"):
        roofline.peaks("trn9")


@pytest.mark.parametrize(
    ("op", "args", "family", "flops", "nbytes"),
    [
        # [1024, 512] @ [512, 256], fp32: 2·M·K·N; A, B and C once.
        ("aten::mm", [Arg((1024, 512)), Arg((512, 256))], "matmul", 2 * 1024 * 512 * 256,
         (1024 * 512 + 512 * 256 + 1024 * 256) * 4),
        # bias + [64, 512] @ [512, 256] in bf16: the bias read too.
        ("aten::addmm", [Arg((256,), 2), Arg((64, 512), 2), Arg((512, 256), 2), Arg(None, 0, 1),
                         Arg(None, 0, 1)], "matmul", 2 * 64 * 512 * 256,
         (256 + 64 * 512 + 512 * 256 + 64 * 256) * 2),
        # x[2, 3, 64] · weight[32, 64]ᵀ + bias[32]: 6 rows.
        ("aten::linear", [Arg((2, 3, 64)), Arg((32, 64)), Arg((32,))], "matmul", 2 * 6 * 64 * 32,
         (2 * 3 * 64 + 32 * 64 + 32 + 6 * 32) * 4),
        # 3→8 channels, 3x3, stride 2, padding 1 on 32x32: a 16x16 output.
        ("aten::conv2d", [Arg((1, 3, 32, 32)), Arg((8, 3, 3, 3)), Arg((8,)), Arg(None, 0, [2, 2]),
                          Arg(None, 0, [1, 1]), Arg(None, 0, [1, 1]), Arg(None, 0, 1)],
         "conv", 2 * 8 * 16 * 16 * 3 * 9, (3 * 32 * 32 + 8 * 3 * 9 + 8 + 8 * 16 * 16) * 4),
        # Broadcast add: both inputs read, the [1000, 1000] output written.
        ("aten::add", [Arg((1000, 1000)), Arg((1000,)), Arg(None, 0, 1)], "elementwise", 0,
         (1000 * 1000 + 1000 + 1000 * 1000) * 4),
        ("aten::sum", [Arg((4096,), 2), Arg(None, 0, None)], "reduction", 0, 4096 * 2),
        ("aten::view", [Arg((8, 8)), Arg(None, 0, [64])], "view", 0, 0),
    ],
)  # fmt: skip
def test_roofline_numbers_by_hand(op: str, args: list[Arg], family: str, flops: int, nbytes: int) -> None:
    est = roofline.estimate(op, args)
    assert est is not None
    assert (est.family, est.flops, est.bytes) == (family, flops, nbytes)
    itemsize = next(a.itemsize for a in args if a.shape is not None)
    assert est.us == pytest.approx(_us(flops, nbytes, itemsize))
    assert est.bound == ("tensor" if flops / P.tensor_flops(itemsize) > nbytes / P.hbm_bytes_per_s else "hbm")


def test_the_big_matmul_is_tensor_bound_and_ops_without_tensors_have_no_estimate() -> None:
    est = roofline.estimate("aten::mm", [Arg((1024, 512)), Arg((512, 256))])
    assert est is not None and est.bound == "tensor"
    assert est.us == pytest.approx(2 * 1024 * 512 * 256 / P.tensor_flops_32 * 1e6)
    assert roofline.estimate("aten::randn", [Arg(None, 0, [4, 4])]) is None


class Tiny(torch.nn.Module):
    """A matmul (a kernel takes it: cost model) and elementwise ops on a larger tensor (roofline)."""

    def __init__(self) -> None:
        super().__init__()
        self.w = torch.nn.Parameter(torch.randn(256, 256))

    def forward(self, x: torch.Tensor, big: torch.Tensor) -> torch.Tensor:
        y = torch.matmul(x, self.w)
        for _ in range(3):
            big = big * 1.5
        return y.sum() + big.sum()


def test_a_profile_ranks_by_device_time_with_its_sources() -> None:
    x, big = torch.randn(64, 256), torch.randn(2048, 1024)
    report = torch_nki.profile(Tiny().eval(), x, big, steps=2)
    ranked = [h.device_total_us for h in report.ops if h.device_total_us is not None]
    assert ranked == sorted(ranked, reverse=True)
    assert all(h.device_total_us is None for h in report.ops[len(ranked) :])
    rows = {(h.name, h.target): h for h in report.ops}

    matmul = rows[("aten::matmul", "[[64, 256], [256, 256]]")]
    meta = [torch.empty(64, 256, device="meta"), torch.empty(256, 256, device="meta")]
    per_call = torch_nki.cost("matmul", *meta, target="trn2").total_ns / 1e3
    assert (matmul.kernel, matmul.device_source, matmul.calls) == ("matmul", "cost model", 2)
    assert matmul.device_total_us == pytest.approx(2 * per_call)
    mm = rows[("aten::mm", "[[64, 256], [256, 256]]")]
    assert (mm.device_total_us, mm.device_source) == (0.0, "in aten::matmul")  # not counted twice

    mul = rows[("aten::mul", "[[2048, 1024], []]")]
    assert (mul.kernel, mul.device_source, mul.calls) == (None, "roofline", 6)
    assert mul.device_total_us == pytest.approx(6 * _us(0, 2 * 2048 * 1024 * 4 + 8, 4))
    assert report.ops.index(mul) < report.ops.index(matmul)  # 16 MiB moved 6 times outweighs it
    assert sum(h.device_share for h in report.ops) == pytest.approx(1.0)

    assert not any(h.name == "aten::clone" for h in report.ops)  # capturing inputs is not profiled
    (module,) = report.modules
    total = sum(h.device_total_us or 0.0 for h in report.ops)
    assert module.device_total_us == pytest.approx(total)
    assert module.device_source == "cost model + roofline"
    md = report.to_markdown()
    assert "| trn2 µs | trn2 share | from | cpu self ms | cpu share | kernel |" in md
    assert "| roofline |" in md and "| cost model |" in md


def _event(
    i: int, name: str, start: float, end: float, shapes: list[Any], dtypes: list[str], **kw: Any
) -> FunctionEvent:
    return FunctionEvent(
        id=i, name=name, thread=0, start_us=start, end_us=end, input_shapes=shapes,
        input_dtypes=dtypes, concrete_inputs=[None] * len(shapes), **kw,
    )  # fmt: skip


def test_ranking_is_by_device_time_not_cpu_time() -> None:
    # On the CPU the matmul takes 20 ms and the multiply 1 ms; on the device the multiply of a
    # 64 MiB tensor (read, written: 184 µs at the roofline) outweighs the 1024³ bf16 matmul.
    mm = _event(1, "aten::bmm", 0, 20_000, [[1, 1024, 1024], [1, 1024, 1024]], ["c10::BFloat16"] * 2)
    mul = _event(2, "aten::mul", 20_000, 21_000, [[4096, 4096], []], ["float", "Scalar"])
    modules, ops = hotspots.hotspot_rows([mm, mul])
    assert modules == []
    assert [h.name for h in ops] == ["aten::mul", "aten::bmm"]
    assert [h.self_ms for h in ops] == [1.0, 20.0]
    assert ops[0].device_source == "roofline"
    assert ops[0].device_total_us == pytest.approx(_us(0, 2 * 4096 * 4096 * 4, 4))
    assert ops[1].device_source == "cost model" and ops[1].kernel == "bmm"
    assert 0 < ops[1].device_total_us < ops[0].device_total_us  # type: ignore[operator]


def test_device_time_a_neuron_host_reports_is_used_instead() -> None:
    # A TorchNeuron host: the CPU op launched a kernel on the `neuron` device (a PrivateUse1
    # event); its measured 70 µs is the row's time, and the estimates are not used.
    mm = _event(1, "aten::mm", 0, 500, [[512, 512], [512, 512]], ["float"] * 2, use_device="neuron")
    mm.append_kernel("nki_matmul", 0, 70.0)
    add = _event(2, "aten::add", 500, 600, [[512, 512], [512, 512], []], ["float"] * 2 + ["Scalar"],
                 use_device="neuron")  # fmt: skip
    add.append_kernel("nki_add", 0, 90.0)
    device = _event(3, "nki_matmul", 10, 80, [], [], use_device="neuron", device_type=DeviceType.PrivateUse1)
    _, ops = hotspots.hotspot_rows([mm, add, device])
    assert [(h.name, h.device_total_us, h.device_source) for h in ops] == [
        ("aten::add", 90.0, "measured"),
        ("aten::mm", 70.0, "measured"),
    ]
    assert math.isclose(sum(h.device_share for h in ops), 1.0)
    # The same events from a host without the device: estimated.
    plain = [_event(1, "aten::add", 0, 100, [[512, 512], [512, 512], []], ["float"] * 2 + ["Scalar"])]
    (row,) = hotspots.hotspot_rows(plain)[1]
    assert row.device_source == "roofline"
    assert row.device_total_us == pytest.approx(_us(0, 3 * 512 * 512 * 4, 4))


def test_a_module_sums_its_own_ops_measured_or_estimated() -> None:
    # A module range holding a matmul and an add: its row sums their device times.
    def events(**kw: Any) -> list[FunctionEvent]:
        block = _event(0, "nki.module::block", 0, 700, [], [], **kw)
        mm = _event(1, "aten::mm", 10, 500, [[512, 512], [512, 512]], ["float"] * 2, **kw)
        add = _event(2, "aten::add", 500, 600, [[512, 512], [512, 512], []], ["float"] * 2 + ["Scalar"], **kw)
        for op in (mm, add):
            op.set_cpu_parent(block)
            block.append_cpu_child(op)
        return [block, mm, add]

    modules = {"block": torch.nn.Identity()}
    plain = events()
    (row,), ops = hotspots.hotspot_rows(plain, modules)
    assert (row.name, row.calls, row.kernel) == ("block", 1, None)
    assert row.self_ms == pytest.approx(0.7)  # its own ops included, submodules excluded
    assert row.device_source == "cost model + roofline"  # mm has a kernel, add the roofline
    assert row.device_total_us == pytest.approx(sum(h.device_total_us or 0.0 for h in ops))

    measured = events(use_device="neuron")
    measured[1].append_kernel("nki_matmul", 0, 70.0)
    measured[2].append_kernel("nki_add", 0, 90.0)
    device = _event(3, "nki_add", 500, 590, [], [], use_device="neuron", device_type=DeviceType.PrivateUse1)
    (row,), _ = hotspots.hotspot_rows([*measured, device], modules)
    assert (row.device_total_us, row.device_source) == (160.0, "measured")

"""Special values behave as in ATen: for every op with a reference (read from the registry), its
largest sample in fp32, bf16 and fp16 with NaN, +inf and -inf written into an input, with the
inputs scaled to very large magnitudes (logits of 1e4), and with every float scalar NaN, gives
the reference's outputs — NaN where ATen has NaN,
the same infinities, and the op's tolerance elsewhere.

The reference runs in fp32 on the same inputs (bf16 inputs upcast, its outputs rounded back), so
the comparison is of the special-value semantics, not of rounding — nor of ATen's bf16 GEMM,
which on this machine turns a row next to an infinite one into NaN.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest
import torch

from torch_nki import testing

OPS = testing.ops_with_reference()


def _first_sample(op: str, dtype: torch.dtype) -> testing.SampleInput:
    samples = testing.sample_inputs(op, dtypes=[dtype])
    if not samples:
        pytest.skip(f"{op} declares no {dtype} sample")
    return max(samples, key=lambda s: sum(t.numel() for t in s.tensors) if len(s.tensors) else 0)


Change = Callable[[int, torch.Tensor], torch.Tensor]


def _with(sample: testing.SampleInput, change: Change) -> testing.SampleInput:
    args = []
    index = 0
    for a in sample.args:
        if isinstance(a, torch.Tensor) and a.is_floating_point():
            a = change(index, a.clone())
            index += 1
        args.append(a)
    return testing.SampleInput(sample.op, sample.dtype, tuple(args), sample.index)


def _poison(index: int, t: torch.Tensor) -> torch.Tensor:
    """NaN, +inf and -inf at three spread-out elements of the first tensor input."""
    if index == 0 and t.numel() >= 3:
        flat = t.view(-1)
        flat[0] = float("nan")
        flat[t.numel() // 2] = float("inf")
        flat[-1] = float("-inf")
    return t


def _masked_row(which: int) -> Change:
    """A fully masked row: the first row (along the last dim) of tensor input ``which`` all -inf,
    as a padded logit row or a masked-out key gives."""

    def change(index: int, t: torch.Tensor) -> torch.Tensor:
        if index == which and t.dim() >= 1 and t.numel() > 0:
            t.reshape(-1, t.shape[-1])[0] = float("-inf")
        return t

    return change


def _huge(index: int, t: torch.Tensor) -> torch.Tensor:
    """The first tensor input at magnitudes around 1e4: exp() of it overflows unless the kernel
    subtracts the maximum first."""
    return t * 1e4 if index == 0 else t


def _nan_scalars(sample: testing.SampleInput) -> testing.SampleInput:
    """Every float scalar argument NaN (an ``eps``, a ``scale``)."""
    args = tuple(float("nan") if type(a) is float else a for a in sample.args)
    if args == sample.args:
        pytest.skip(f"{sample.op} has no float scalar")
    return testing.SampleInput(sample.op, sample.dtype, args, sample.index)


DTYPES = pytest.mark.parametrize(
    "dtype", [torch.float32, torch.bfloat16, torch.float16], ids=["f32", "bf16", "f16"]
)


@pytest.mark.parametrize(
    "pattern",
    [_poison, _masked_row(0), _masked_row(1), _masked_row(2), _huge],
    ids=["nan_inf", "masked_row0", "masked_row1", "masked_row2", "huge"],
)
@DTYPES
@pytest.mark.parametrize("op", OPS)
def test_special_values_match_aten(op: str, pattern: Change, dtype: torch.dtype) -> None:
    _check(_with(_first_sample(op, dtype), pattern))


@DTYPES
@pytest.mark.parametrize("op", OPS)
def test_nan_scalars_match_aten(op: str, dtype: torch.dtype) -> None:
    _check(_nan_scalars(_first_sample(op, dtype)))


def _check(sample: testing.SampleInput) -> None:
    got = testing.call(sample)
    upcast = [a.float() if isinstance(a, torch.Tensor) and a.is_floating_point() else a for a in sample.args]
    want = [w.to(g.dtype) for g, w in zip(got, testing.reference(sample, upcast), strict=True)]
    for (rtol, atol), g, w in zip(testing.tolerances(sample), got, want, strict=True):
        assert torch.equal(g.isnan(), w.isnan()), f"{sample}: NaN positions differ"
        assert torch.equal(g.isposinf(), w.isposinf()) and torch.equal(g.isneginf(), w.isneginf()), (
            f"{sample}: infinities differ"
        )
        finite = w.isfinite()
        scale = w[finite].abs().max() if finite.any() else torch.tensor(1.0)
        atol = atol * max(1.0, float(scale))
        torch.testing.assert_close(g[finite], w[finite], rtol=rtol, atol=atol, msg=lambda m: f"{sample}: {m}")

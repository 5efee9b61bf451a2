"""LayerNorm on badly conditioned rows: rows far from zero relative to their spread, and
constant rows (where ``rstd`` is ``1/sqrt(eps)``). Both the bf16 path through the tensor engine
(the bias enters as an outer product in PSUM) and the fp32 path must stay as close to the
float64 answer as ATen's own op does on the same inputs."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

import torch_nki  # noqa: F401  (registers torch.ops.neuron)

ROWS, COLS = 200, 1000  # a ragged row tile; 1000 is not a multiple of 512


def _offset_rows(dtype: torch.dtype) -> torch.Tensor:
    gen = torch.Generator().manual_seed(3)
    means = torch.randn(ROWS, 1, generator=gen) * 300
    spreads = torch.exp(torch.empty(ROWS, 1).uniform_(-1, 4, generator=gen))
    x = means + spreads * torch.randn(ROWS, COLS, generator=gen)
    x[5] = 7.0
    x[6] = -1234.5
    return x.to(dtype)


@pytest.mark.parametrize("affine", ["weight_and_bias", "weight", "none"])
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32], ids=["bf16", "f32"])
def test_offset_and_constant_rows_are_as_accurate_as_aten(dtype: torch.dtype, affine: str) -> None:
    x = _offset_rows(dtype)
    gen = torch.Generator().manual_seed(4)
    weight = bias = None
    if affine != "none":
        weight = torch.randn(COLS, generator=gen).to(dtype)
        weight[::7] = 0
    if affine == "weight_and_bias":
        bias = torch.randn(COLS, generator=gen).to(dtype)

    def wide(t: torch.Tensor | None, to: torch.dtype) -> torch.Tensor | None:
        return None if t is None else t.to(to)

    got = torch.ops.neuron.layernorm(x, weight, bias, 1e-5)
    truth = F.layer_norm(x.double(), (COLS,), wide(weight, torch.float64), wide(bias, torch.float64), 1e-5)
    aten = F.layer_norm(x.float(), (COLS,), wide(weight, torch.float32), wide(bias, torch.float32), 1e-5)
    aten = aten.to(dtype)

    ours_err = (got.double() - truth).abs()
    aten_err = (aten.double() - truth).abs()
    # Row by row: no row may be much worse than ATen's on the same row (constant rows included,
    # where both must give the bias), beyond the conditioning every fp32 implementation shares:
    # an ulp of the fp32 mean, scaled by rstd and the weight.
    worst_ours, worst_aten = ours_err.amax(dim=1), aten_err.amax(dim=1)
    ulp = torch.finfo(dtype).eps * truth.abs().amax(dim=1).clamp_min(1.0)
    xd = x.double()
    rstd = 1 / torch.sqrt(xd.var(dim=1, unbiased=False) + 1e-5)
    w_max = 1.0 if weight is None else float(weight.double().abs().max())
    mean_ulp = torch.finfo(torch.float32).eps * xd.mean(dim=1).abs() * rstd * w_max
    allowed = 2 * worst_aten + 2 * mean_ulp + ulp
    assert torch.all(worst_ours <= allowed), (
        f"rows {torch.nonzero(worst_ours > allowed).flatten().tolist()[:8]}"
    )
    for row in (5, 6):
        want = torch.zeros(COLS, dtype=torch.float64) if bias is None else bias.double()
        torch.testing.assert_close(got[row].double(), want, rtol=0, atol=float(4 * ulp[row]))
    if dtype == torch.bfloat16:
        # Rounded once from an accurate fp32 value: almost every element is ATen's.
        same = (got == aten).double().mean().item()
        assert same >= 0.99, f"only {same:.4f} of the outputs equal ATen's"

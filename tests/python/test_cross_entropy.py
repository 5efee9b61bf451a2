"""``neuron.cross_entropy`` where the generic suites do not reach: integer targets at the boundary
(int64 and int32, out-of-range values), ``ignore_index`` with special values in ignored rows,
every row ignored, a 128k vocabulary, and output shapes chosen by ``reduction`` under
``torch.compile``."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

import torch_nki

neuron = torch.ops.neuron


def _logits(n: int, v: int, seed: int = 0) -> torch.Tensor:
    return torch.randn(n, v, generator=torch.Generator().manual_seed(seed)) * 3


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_int32_and_int64_targets_match_aten(reduction: str) -> None:
    x = _logits(300, 50)
    t = torch.randint(0, 50, (300,), generator=torch.Generator().manual_seed(1))
    t[::7] = -100
    want = F.cross_entropy(x, t, reduction=reduction)
    for target in (t, t.to(torch.int32)):
        got = neuron.cross_entropy(x, target, reduction=reduction)
        assert got.shape == want.shape and got.dtype == want.dtype
        torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)


def test_a_target_out_of_range_is_an_index_error_naming_the_element() -> None:
    x = _logits(4, 10)
    with pytest.raises(torch_nki.ContractIndexError) as err:
        neuron.cross_entropy(x, torch.tensor([0, 1, 10, 2]))
    assert isinstance(err.value, IndexError)
    assert (err.value.op, err.value.param) == ("cross_entropy", "target")
    assert str(err.value) == (
        "neuron::cross_entropy: target[2] = 10 is out of range: the kernel takes indices in [0, 10) or -100"
    )
    with pytest.raises(IndexError, match=r"target\[1\] = -1 is out of range"):
        neuron.cross_entropy(x, torch.tensor([0, -1, 3, 2]))
    with pytest.raises(IndexError, match="does not fit the kernel's int32"):
        neuron.cross_entropy(x, torch.tensor([0, 1, 2**33, 2]))
    # ignore_index itself is accepted wherever it lies.
    assert neuron.cross_entropy(x, torch.tensor([0, 7, 3, 7]), ignore_index=7).isfinite()
    with pytest.raises(
        TypeError, match=r"target has dtype torch\.float32 \(f32\), but the contract allows target in \{i32\}"
    ):
        neuron.cross_entropy(x, torch.zeros(4))


def test_ignored_rows_keep_their_nan_out_and_every_row_ignored_is_nan_for_mean() -> None:
    x = _logits(6, 9)
    t = torch.tensor([1, -100, 3, -100, 8, 0])
    x[1, 4] = float("nan")  # an ignored row: ATen skips it
    x[3, :] = float("inf")
    x[5, 2] = float("-inf")  # a finite loss still
    for reduction in ("mean", "sum", "none"):
        torch.testing.assert_close(
            neuron.cross_entropy(x, t, reduction=reduction), F.cross_entropy(x, t, reduction=reduction)
        )
    ignored = torch.full((3,), -100)
    assert neuron.cross_entropy(x[:3], ignored).isnan()
    assert neuron.cross_entropy(x[:3], ignored, reduction="sum") == 0
    leaf = _logits(3, 9).requires_grad_(True)
    neuron.cross_entropy(leaf, ignored).backward()
    assert leaf.grad is not None and torch.equal(leaf.grad, torch.zeros(3, 9))


def test_a_target_logit_of_minus_infinity_gives_an_infinite_loss() -> None:
    x = _logits(2, 5)
    x[0, 3] = float("-inf")
    t = torch.tensor([3, 1])
    torch.testing.assert_close(
        neuron.cross_entropy(x, t, reduction="none"), F.cross_entropy(x, t, reduction="none")
    )


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_a_128k_vocabulary_forward_and_backward(dtype: torch.dtype) -> None:
    v = 128_256
    x = _logits(5, v).to(dtype).requires_grad_(True)
    t = torch.tensor([0, v - 1, 65_536, -100, 2047])
    loss = neuron.cross_entropy(x, t)
    (grad,) = torch.autograd.grad(loss, x)
    ref = x.detach().float().requires_grad_(True)
    want = F.cross_entropy(ref, t)
    (want_grad,) = torch.autograd.grad(want, ref)
    tol = {"rtol": 1e-5, "atol": 1e-5} if dtype == torch.float32 else {"rtol": 1.6e-2, "atol": 1e-2}
    torch.testing.assert_close(loss.float(), want, **tol)
    torch.testing.assert_close(grad.float(), want_grad, **tol)


@pytest.mark.usefixtures("dynamo")
@pytest.mark.parametrize("dynamic", [False, True])
def test_reduction_chooses_the_output_shape_under_compile(dynamic: bool) -> None:
    def losses(x: torch.Tensor, t: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return neuron.cross_entropy(x, t, reduction="none"), neuron.cross_entropy(x, t)

    compiled = torch.compile(losses, fullgraph=True, dynamic=dynamic)
    for n in (6, 9):
        x, t = _logits(n, 11), torch.arange(n) % 11
        per_row, mean = compiled(x, t)
        assert per_row.shape == (n,) and mean.shape == ()
        torch.testing.assert_close(mean, F.cross_entropy(x, t))

"""flash_attention's lse is torch.logsumexp of the scaled scores (its declared reference) where
scores are infinite or NaN: a row of +inf scores, or of mixed +inf and -inf, gives +inf, a row
of -inf scores -inf, and NaN appears only where the reference has NaN. Its out is softmax(scores)
@ v on the same rows: NaN exactly where that definition is NaN (a row with no finite maximum,
including a fully masked one). ATen's CPU SDPA kernel returns other values on such rows; the op
follows its declared reference, not that kernel."""

import torch

import torch_nki  # noqa: F401

for dtype in (torch.float32, torch.bfloat16, torch.float16):
    g = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(1, 2, 6, 8, generator=g).to(dtype) for _ in range(3))
    k[0, 0, :, 0] = 1.0
    k[0, 1, :, 0] = torch.tensor([1.0, -1.0, 1.0, -1.0, 1.0, -1.0])
    q[0, 0, 1, 0] = float("inf")  # every score of row 1 is +inf
    q[0, 0, 2, 0] = float("-inf")  # every score of row 2 is -inf
    q[0, 1, 3, 0] = float("nan")  # row 3 of head 1 is NaN
    q[0, 1, 4, 0] = float("inf")  # row 4 of head 1 mixes +inf and -inf
    for causal in (False, True):
        out, lse = torch.ops.neuron.flash_attention(q, k, v, causal)
        scores = (q.float() @ k.float().transpose(-1, -2)) * 8**-0.5
        if causal:
            scores = scores + torch.full((6, 6), float("-inf")).triu(1)
        want = torch.logsumexp(scores, -1)
        for check in (torch.isnan, torch.isposinf, torch.isneginf):
            assert torch.equal(check(lse), check(want)), (dtype, causal, check.__name__, lse, want)
        finite = want.isfinite()
        torch.testing.assert_close(lse[finite], want[finite], rtol=2e-2, atol=2e-2)
        want_out = torch.softmax(scores, -1) @ v.float()
        for check in (torch.isnan, torch.isposinf, torch.isneginf):
            assert torch.equal(check(out.float()), check(want_out)), (dtype, causal, "out", check.__name__)
        finite = want_out.isfinite()
        torch.testing.assert_close(out.float()[finite], want_out[finite], rtol=2e-2, atol=2e-2)
print("OK")

"""swap is all or nothing per instance: a verification that raises reverts the instance, a
model on the meta device is left as it was, and an unverified look-alike (an RMSNorm-shaped
module computing x̂·(2 + w), which no kind computes) is reverted instead of changing the output
silently."""

import torch

import torch_nki


class LookAlikeRMSNorm(torch.nn.Module):
    def __init__(self, d: int) -> None:
        super().__init__()
        self.weight = torch.nn.Parameter(torch.zeros(d))
        self.eps = 1e-6
        self.fail = False

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.fail:
            raise RuntimeError("fails on a later call")
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * (2 + self.weight)


model = torch.nn.Sequential(torch.nn.Linear(16, 16), LookAlikeRMSNorm(16))
x = torch.randn(3, 16)
with torch.no_grad():
    want = model(x)
report = torch_nki.swap(model)
assert [e.status for e in report.entries] == ["swapped", "reverted"], report.to_markdown()
with torch.no_grad():
    torch.testing.assert_close(model(x), want)
torch_nki.unswap(model)
profiled = torch_nki.profile(model, x, steps=1)
model[1].fail = True
report = torch_nki.swap(model, profiled)
assert report.entries[1].status == "reverted" and "RuntimeError" in report.entries[1].reason
assert "forward" not in model[1].__dict__
meta = torch.nn.Sequential(torch.nn.Linear(8, 8)).to("meta")
report = torch_nki.swap(meta)
assert [e.status for e in report.entries] == ["reverted"]
assert all("forward" not in m.__dict__ for m in meta.modules())
print("OK")

"""``torch_nki.kernel(op).signature(*args)``: one call checked once, then run, costed, emitted and
traced as the op's own paths do it."""

from __future__ import annotations

import pytest
import torch

import torch_nki
from torch_nki import testing


def _meta(*shape: int, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    return torch.empty(*shape, dtype=dtype, device="meta")


def test_outputs_are_the_calls_every_output() -> None:
    sig = torch_nki.kernel("rmsnorm").signature(_meta(30, 100), _meta(100), 1e-6)
    assert sig.outputs == [((30, 100), torch.float32), ((30,), torch.float32)]
    bf16 = torch_nki.kernel("rmsnorm").signature(
        _meta(30, 100, dtype=torch.bfloat16), _meta(100, dtype=torch.bfloat16), eps=1e-6
    )
    assert bf16.outputs == [((30, 100), torch.bfloat16), ((30,), torch.float32)]
    # float64 is computed in float32 and returned as float64, as the op does.
    f64 = torch_nki.kernel("add").signature(
        _meta(2, 3, dtype=torch.float64), _meta(2, 3, dtype=torch.float64)
    )
    assert f64.outputs == [((2, 3), torch.float64)]
    assert "rmsnorm" in repr(sig) and "f32[30, 100]" in repr(sig)


def test_a_contract_violation_raises_when_the_signature_is_made() -> None:
    rmsnorm = torch_nki.kernel("rmsnorm")
    with pytest.raises(torch_nki.ContractShapeError, match="weight has shape"):
        rmsnorm.signature(_meta(30, 100), _meta(99), 1e-6)
    with pytest.raises(TypeError, match="argument eps expects float, got bool"):
        rmsnorm.signature(_meta(30, 100), _meta(100), True)
    with pytest.raises(torch_nki.UnknownOpError, match="no kernel named `nope`"):
        torch_nki.kernel("nope")


def test_run_gives_the_ops_bits_and_compiles_once() -> None:
    x, w = torch.randn(130, 96), torch.randn(96)
    sig = torch_nki.kernel("rmsnorm").signature(x, w, 1e-6)
    y, rstd = sig.run(x, w)
    assert torch.equal(y, torch.ops.neuron.rmsnorm(x, w, 1e-6))
    assert rstd.shape == (130,)
    size = torch_nki.cache_size()
    for _ in range(3):
        assert torch.equal(sig.run(x, w)[0], y)
    assert torch_nki.cache_size() == size
    x64, w64 = x.double(), w.double()
    y64, _ = torch_nki.kernel("rmsnorm").signature(x64, w64, 1e-6).run(x64, w64)
    assert y64.dtype == torch.float64 and torch.equal(y64, y.double())
    with pytest.raises(torch_nki.NkiError, match=r"input 0 is f32 \[2, 96\], but the signature is for"):
        sig.run(torch.randn(2, 96), w)


def test_an_evicted_program_is_compiled_again_through_the_cache() -> None:
    x, y = torch.rand(5, 7), torch.rand(5, 7)
    sig = torch_nki.kernel("add").signature(x, y)
    first = sig.run(x, y)
    old = torch_nki.cache_capacity()
    try:
        torch_nki.cache_capacity(1)
        torch.ops.neuron.add(torch.rand(3, 3), torch.rand(3, 3))  # evicts add 5x7
        assert torch.equal(sig.run(x, y), first)
        assert torch_nki.cache_size() == 1
    finally:
        torch_nki.cache_capacity(old)


def test_cost_emit_program_and_tolerances_are_the_ops() -> None:
    args = (_meta(300, 1000, dtype=torch.bfloat16), _meta(1000, dtype=torch.bfloat16), 1e-6)
    sig = torch_nki.kernel("rmsnorm").signature(*args)
    report = sig.cost("trn1")
    assert report.target == "trn1"
    assert report.total_ns == torch_nki.cost("rmsnorm", *args, target="trn1").total_ns
    assert sig.emit() == torch_nki.emit("rmsnorm", *args)
    assert sig.program("trn2").instruction_count() > 0
    with pytest.raises(ValueError, match="unknown target `trn9`"):
        sig.cost("trn9")
    sample = testing.sample_inputs("rmsnorm", dtypes=[torch.bfloat16])[0]
    tolerances = torch_nki.kernel("rmsnorm").signature(*sample.args).tolerances()
    assert tolerances[:1] == testing.tolerances(sample)


def test_index_domains_name_each_tensor_parameter() -> None:
    logits, target = _meta(4, 10), _meta(4, dtype=torch.int64)
    domains = torch_nki.kernel("cross_entropy").signature(logits, target).index_domains()
    assert len(domains) == 2
    assert domains[0] is None
    assert domains[1] == (0, 10, -100)

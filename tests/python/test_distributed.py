"""DTensor sharding of every op and backward kernel, in one process.

DTensor runs on torch's ``fake`` process group under ``LocalTensorMode``, which keeps every
rank's shard and carries collectives out on them, so a sharded call computes real values on
each simulated device. For every registry op (backward kernels included), every declared f32
sample and every strategy its derived rules offer, the inputs are distributed as the strategy
wants: the call must choose that strategy (outputs placed as it says, no redistribution) and
its result must match the unsharded call within the op's tolerance. Inputs sharded on any
other dimension must give the same result too (DTensor redistributes to a strategy that works),
and forward ops are differentiated through DTensor. Samples with odd sizes give uneven shards.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import pytest
import torch

import torch_nki
from torch_nki import _sharding, testing

dist = pytest.importorskip("torch.distributed")
if not dist.is_available():
    pytest.skip("torch.distributed is not available", allow_module_level=True)

from torch.distributed._local_tensor import LocalTensorMode  # noqa: E402
from torch.distributed.device_mesh import DeviceMesh, init_device_mesh  # noqa: E402
from torch.distributed.tensor import (  # noqa: E402
    DTensor,
    Partial,
    Placement,
    Replicate,
    Shard,
    distribute_tensor,
)

WORLD = 2
OPS = sorted(testing.ops_with_reference() + testing.backward_kernels())


@pytest.fixture(scope="module")
def mesh() -> Iterator[DeviceMesh]:
    """A 1-D mesh of ``WORLD`` simulated CPU devices."""
    created = not dist.is_initialized()
    if created:
        dist.init_process_group("fake", rank=0, world_size=WORLD)
    yield init_device_mesh("cpu", (WORLD,))
    if created:
        dist.destroy_process_group()


def samples(op: str) -> list[testing.SampleInput]:
    spec = testing.op_spec(op)
    if spec.backward_of:
        return testing.backward_sample_inputs(op, dtypes=[torch.float32])
    return testing.sample_inputs(op, dtypes=[torch.float32])


def _dt(p: _sharding.Placement | None) -> Placement:
    if p is None or p[0] == "replicate":
        return Replicate()
    if p[0] == "shard":
        return Shard(p[1])
    return Partial("sum")


def offered(sample: testing.SampleInput, devices: int = WORLD) -> list[_sharding.Strategy]:
    """The strategies the op's rules offer for this call on ``devices`` devices."""
    reg, spec = testing._lookup(sample.op)
    rules = _sharding.rules_of(spec)
    tensors = [a for p, a in zip(spec.params, sample.args, strict=True) if p.is_tensor]
    scalars = [a for p, a in zip(spec.params, sample.args, strict=True) if not p.is_tensor]
    dtypes = [None if t is None else torch_nki._dtypes.caller_name(t.dtype) for t in tensors]

    def accepts(shapes: list[tuple[int, ...] | None]) -> bool:
        try:
            reg.native.Signature(spec.name, shapes, dtypes, scalars)
        except (ValueError, TypeError, IndexError):
            return False
        return True

    return _sharding.strategies(
        spec,
        rules,
        sample.args,
        lambda v: tuple(v.shape) if isinstance(v, torch.Tensor) else None,
        devices,
        accepts,
    )


def run_sharded(
    mesh: DeviceMesh, sample: testing.SampleInput, placements: list[Placement | None]
) -> tuple[list[Any], list[torch.Tensor]]:
    """The op on ``sample``'s tensors distributed with ``placements``: each output's placements
    and its full value."""
    spec = testing.op_spec(sample.op)
    op = getattr(getattr(torch.ops, spec.namespace), spec.forward_op[0] if spec.forward_op else spec.name)
    with LocalTensorMode(WORLD):
        args = [
            distribute_tensor(a, mesh, [p]) if isinstance(a, torch.Tensor) and p is not None else a
            for a, p in zip(sample.args, placements, strict=True)
        ]
        outs = testing.public_outputs(op(*args))
        placed = [o.placements[0] for o in outs]
        full = [o.full_tensor() for o in outs]
        full = [f._local_tensors[0] if hasattr(f, "_local_tensors") else f for f in full]
    return placed, full


def expected(sample: testing.SampleInput) -> list[torch.Tensor]:
    spec = testing.op_spec(sample.op)
    op = getattr(getattr(torch.ops, spec.namespace), spec.forward_op[0] if spec.forward_op else spec.name)
    with torch.no_grad():
        return list(testing.public_outputs(op(*sample.args)))


def tolerances(sample: testing.SampleInput) -> list[tuple[float, float]]:
    """Per output (``saved`` ones included): the op's tolerance, once more for the partial sums
    a split adds up in another order."""
    reg, spec = testing._lookup(sample.op)
    tensors = [a for p, a in zip(spec.params, sample.args, strict=True) if p.is_tensor]
    scalars = [a for p, a in zip(spec.params, sample.args, strict=True) if not p.is_tensor]
    tols = reg.native.Signature(
        spec.name,
        [None if t is None else tuple(t.shape) for t in tensors],
        [None if t is None else torch_nki._dtypes.caller_name(t.dtype) for t in tensors],
        scalars,
    ).tolerance()
    return [(2 * t[0], 2 * t[1]) if t else (1e-5, 1e-5) for t in tols]


def assert_matches(sample: testing.SampleInput, what: str, actual: list[torch.Tensor]) -> None:
    for i, (a, e, (rtol, atol)) in enumerate(zip(actual, expected(sample), tolerances(sample), strict=True)):
        torch.testing.assert_close(
            a, e, rtol=rtol, atol=atol, msg=lambda m, i=i: f"{sample} {what} output {i}: {m}"
        )


@pytest.mark.parametrize("op", OPS)
def test_every_offered_strategy_is_chosen_and_matches_the_unsharded_call(mesh: DeviceMesh, op: str) -> None:
    found = 0
    for sample in samples(op):
        for strategy in offered(sample):
            if not strategy.split:
                continue
            found += 1
            placements = [None if p is None else _dt(p) for p in strategy.inputs]
            placed, full = run_sharded(mesh, sample, placements)
            assert placed == [_dt(p) for p in strategy.outputs], (sample, strategy)
            assert_matches(sample, f"split {strategy.split}", full)
    rules = torch_nki.sharding(op).semantics
    if any(d.kind != "whole" for d in rules.dims):
        assert found, f"{op}: no sample lets any dimension be split"


@pytest.mark.parametrize("op", OPS)
def test_any_input_sharding_gives_the_unsharded_result(mesh: DeviceMesh, op: str) -> None:
    """Each tensor input sharded on each of its dimensions (the others replicated): whatever
    strategy DTensor picks, uneven shards and whole dimensions included, the result is right."""
    spec = testing.op_spec(op)
    sample = samples(op)[0]
    for i, (p, a) in enumerate(zip(spec.params, sample.args, strict=True)):
        if not isinstance(a, torch.Tensor):
            continue
        for axis in range(a.dim()):
            placements: list[Placement | None] = [
                Replicate() if isinstance(x, torch.Tensor) else None for x in sample.args
            ]
            placements[i] = Shard(axis)
            _, full = run_sharded(mesh, sample, placements)
            assert_matches(sample, f"{p.name} split on dim {axis}", full)


FORWARD_WITH_BACKWARD = [op for op in testing.ops_with_reference() if testing.op_spec(op).backward]


GRADIENT_CASES = [(op, "every output") for op in FORWARD_WITH_BACKWARD] + [
    (op, "the first output") for op in FORWARD_WITH_BACKWARD if len(testing.op_spec(op).public_outputs) > 1
]


@pytest.mark.parametrize(("op", "loss_of"), GRADIENT_CASES)
def test_gradients_through_dtensor_match(mesh: DeviceMesh, op: str, loss_of: str) -> None:
    """Forward and backward on sharded inputs (each offered split of the first sample), with a
    loss of every output or of the first only (the others' gradients are then zero DTensors):
    every input's gradient matches the unsharded one."""
    spec = testing.op_spec(op)
    sample = samples(op)[0]
    floats = [isinstance(a, torch.Tensor) and a.is_floating_point() for a in sample.args]
    with torch.no_grad():
        weights = [torch.randn(o.shape) for o in testing.call(sample)]
    used = len(weights) if loss_of == "every output" else 1

    def grads(args: list[Any]) -> list[torch.Tensor | None]:
        outs = testing.public_outputs(getattr(getattr(torch.ops, spec.namespace), spec.name)(*args))
        loss = sum((o * w).sum() for o, w in list(zip(outs, wts, strict=True))[:used])
        assert isinstance(loss, torch.Tensor)
        loss.backward()
        return [a.grad if f else None for a, f in zip(args, floats, strict=True)]

    plain = [
        a.detach().clone().requires_grad_(f) if isinstance(a, torch.Tensor) else a
        for a, f in zip(sample.args, floats, strict=True)
    ]
    wts: list[Any] = weights
    reference = grads(plain)
    for strategy in offered(sample):
        if not strategy.split:
            continue
        with LocalTensorMode(WORLD):
            args = [
                distribute_tensor(a.detach(), mesh, [_dt(p)]).requires_grad_(f)
                if isinstance(a, torch.Tensor)
                else a
                for a, p, f in zip(sample.args, strategy.inputs, floats, strict=True)
            ]
            wts = [distribute_tensor(w, mesh, [Replicate()]) for w in weights]
            got = grads(args)
            full = [None if g is None else g.full_tensor() for g in got]
            full = [
                f._local_tensors[0] if f is not None and hasattr(f, "_local_tensors") else f for f in full
            ]
        for name, g, r in zip([p.name for p in spec.params], full, reference, strict=True):
            if r is None:
                continue
            assert g is not None, (op, name, strategy.split)
            torch.testing.assert_close(
                g,
                r,
                rtol=1e-4,
                atol=1e-4,
                msg=lambda m, n=name, s=strategy.split: f"{op} grad {n} split {s}: {m}",
            )


def test_a_split_some_device_cannot_take_is_not_offered() -> None:
    """``matmul`` requires ``K >= 1``: 5 columns over 4 devices leave the last one none, so ``K``
    is not split there; 5 rows split as 2, 2, 1, 0 are fine (a batch may be empty); 3 output
    columns are fewer than the devices."""
    x, w = torch.randn(5, 5), torch.randn(5, 3)
    sample = testing.SampleInput("matmul", torch.float32, (x, w), 0)
    splits = [s.split for s in offered(sample, devices=4)]
    assert splits == [(), (("B", 0),)]
    assert [s.split for s in offered(sample, devices=2)] == [(), (("B", 0),), (("K", 0),), (("N", 0),)]


def test_a_scalar_that_changes_the_rule_is_not_served_another_values_rule(mesh: DeviceMesh) -> None:
    """``flash_attention``'s ``causal`` makes ``S`` whole: a non-causal call first (which may
    split ``S``) must not leave its rule to a causal call on the same shapes."""
    q, k, v = (torch.randn(1, 2, 6, 8) for _ in range(3))
    for causal in (False, True, False):
        with LocalTensorMode(WORLD):
            args = [distribute_tensor(t, mesh, [Shard(2)]) for t in (q, k, v)]
            out, _ = torch.ops.neuron.flash_attention(*args, causal)
            got = out.full_tensor()
            got = got._local_tensors[0] if hasattr(got, "_local_tensors") else got
        want, _ = torch.ops.neuron.flash_attention(q, k, v, causal)
        torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)


def test_sharding_shows_the_derived_rules() -> None:
    rules = torch_nki.sharding("matmul")
    lines = str(rules).splitlines()
    assert lines[0] == f"neuron::matmul: {testing.op_spec('matmul').contract_text}"
    kinds = {line.split()[0]: line.split()[1] for line in lines[1:]}
    assert kinds == {"..B": "independent:", "K": "summed:", "N": "independent:"}
    assert rules.semantics.dim("K").outputs[0].role == "summed"
    rms = torch_nki.sharding("rmsnorm")
    assert rms.semantics.dim("D").kind == "whole"
    assert "declared `whole(D)`" in str(rms)
    with pytest.raises(torch_nki.UnknownOpError):
        torch_nki.sharding("no_such_op")


def test_the_docs_show_what_sharding_prints() -> None:
    """docs/distributed.md's ``print(torch_nki.sharding(op))`` examples print that today."""
    from pathlib import Path

    text = (Path(__file__).resolve().parents[2] / "docs" / "distributed.md").read_text(encoding="utf-8")
    examples = re.findall(r'>>> print\(torch_nki\.sharding\("(\w+)"\)\)\n(.*?)(?=\n>>>|\n```)', text, re.S)
    assert examples
    for op, shown in examples:
        assert shown == str(torch_nki.sharding(op)), op


def test_scalars_key_the_strategy_cache() -> None:
    """DTensor compares two calls' schemas to reuse a strategy: calls differing only in a
    ``bool`` or a string parameter must differ (``register_sharding`` alone keys ``int``s only)."""
    from torch.distributed.tensor._op_schema import OpSchema

    propagator = DTensor._op_dispatcher.sharding_propagator
    for op, args in [
        (torch.ops.neuron.flash_attention.default, [("q", "k", "v", False), ("q", "k", "v", True)]),
        (torch.ops.neuron.cross_entropy_fwd.default, [("x", "t", -100, "mean"), ("x", "t", -100, "sum")]),
    ]:
        info = propagator.op_to_schema_info[op]
        a, b = (OpSchema(op, values, {}, schema_info=info) for values in args)
        assert a != b, op


def test_every_op_dtensor_dispatches_has_a_strategy() -> None:
    """Registration iterates the registry: every kernel's dispatched op is covered."""
    from torch_nki import distributed

    assert isinstance(DTensor, type)
    names = set(distributed.registered_ops())
    for reg in torch_nki._register.registrations():
        for spec in reg.ops.values():
            assert f"{spec.namespace}::{spec.forward_op[0] if spec.forward_op else spec.name}" in names

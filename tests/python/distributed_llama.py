"""One process of ``test_distributed_llama.py``: a small transformers Llama, swapped with
``torch_nki.swap``, trained a few SGD steps, single-process or as one rank of a 2-process gloo
group under FSDP2 (``fully_shard`` per decoder layer) or tensor parallelism
(``parallelize_module``: column-wise q/k/v/gate/up, row-wise o/down projections, sequence-parallel
norms; :func:`tensor_parallel_plan`).

``tp-compiled`` is the tensor-parallel model under ``torch.compile``. ``2d`` is both on a
2 x (WORLD / 2) mesh: FSDP2 over the first dimension, tensor parallelism over the second.

``python distributed_llama.py MODE OUT [RANK WORLD]`` writes (rank 0) each step's loss, the
first step's gradient of every parameter (full tensors) and the neuron ops whose DTensor sharding
strategies were computed to ``OUT`` with ``torch.save``.
"""

from __future__ import annotations

import os
import sys
from typing import Any

import torch
import transformers

import torch_nki
from torch_nki import _sharding

STEPS = 3
SHARDED: set[str] = set()
"""The ops a DTensor call computed strategies for."""


def _recording(strategies: Any) -> Any:
    def record(spec: Any, *args: Any) -> Any:
        SHARDED.add(spec.name)
        return strategies(spec, *args)

    return record


def build() -> tuple[torch.nn.Module, torch.Tensor]:
    """The model every mode starts from (same seed, same weights), swapped and verified."""
    torch.manual_seed(0)
    config = transformers.LlamaConfig(
        vocab_size=128,
        hidden_size=64,
        intermediate_size=160,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
    )
    model = transformers.LlamaForCausalLM(config)
    ids = torch.randint(0, 128, (2, 17), generator=torch.Generator().manual_seed(3))
    report = torch_nki.profile(model, ids, steps=1)
    swap = torch_nki.swap(model, report)
    assert not swap.reverted, swap.reverted
    return model, ids


def tensor_parallel_plan(layers: int) -> dict[str, Any]:
    """Column-wise q/k/v/gate/up and row-wise o/down projections, with sequence-parallel norms:
    inside each decoder layer the residual stream is split along the sequence (``Shard(1)``),
    gathered before attention and the MLP, and the layer returns it whole."""
    from torch.distributed.tensor import Replicate, Shard
    from torch.distributed.tensor.parallel import (
        ColwiseParallel,
        PrepareModuleInput,
        PrepareModuleInputOutput,
        RowwiseParallel,
        SequenceParallel,
    )

    plan: dict[str, Any] = {}
    for i in range(layers):
        layer = f"model.layers.{i}"
        plan[layer] = PrepareModuleInputOutput(
            input_layouts=(Replicate(),),
            desired_input_layouts=(Shard(1),),
            output_layouts=(Shard(1),),
            desired_output_layouts=(Replicate(),),
            use_local_input=False,
            use_local_output=True,
        )
        plan[f"{layer}.input_layernorm"] = SequenceParallel()
        plan[f"{layer}.post_attention_layernorm"] = SequenceParallel()
        plan[f"{layer}.self_attn"] = PrepareModuleInput(
            input_kwarg_layouts={"hidden_states": Shard(1)},
            desired_input_kwarg_layouts={"hidden_states": Replicate()},
        )
        plan[f"{layer}.mlp"] = PrepareModuleInput(
            input_layouts=(Shard(1),), desired_input_layouts=(Replicate(),)
        )
        for name in (
            "self_attn.q_proj",
            "self_attn.k_proj",
            "self_attn.v_proj",
            "mlp.gate_proj",
            "mlp.up_proj",
        ):
            plan[f"{layer}.{name}"] = ColwiseParallel()
        for name in ("self_attn.o_proj", "mlp.down_proj"):
            plan[f"{layer}.{name}"] = RowwiseParallel(output_layouts=Shard(1), use_local_output=False)
    return plan


def shard_layers(model: Any, mesh: Any) -> None:
    """FSDP2: one unit per decoder layer and the root."""
    from torch.distributed.fsdp import fully_shard

    for layer in model.model.layers:
        fully_shard(layer, mesh=mesh)
    fully_shard(model, mesh=mesh)


def full(t: torch.Tensor) -> torch.Tensor:
    """A DTensor's full value, a plain tensor as is."""
    to_full = getattr(t, "full_tensor", None)
    return (to_full() if to_full is not None else t).detach().clone()


def train(model: torch.nn.Module, ids: torch.Tensor) -> dict[str, Any]:
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    losses: list[float] = []
    grads: dict[str, torch.Tensor] = {}
    for step in range(STEPS):
        loss = model(input_ids=ids, labels=ids).loss
        loss.backward()
        if step == 0:
            grads = {
                n.removeprefix("_orig_mod."): full(p.grad)
                for n, p in model.named_parameters()
                if p.grad is not None
            }
        opt.step()
        opt.zero_grad()
        losses.append(float(full(loss)))
    return {"losses": losses, "grads": grads, "sharded": sorted(SHARDED)}


def main(argv: list[str]) -> None:
    mode, out = argv[0], argv[1]
    if mode == "single":
        model, ids = build()
        torch.save(train(model, ids), out)
        return
    import torch.distributed as dist
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor.parallel import parallelize_module

    _sharding.strategies = _recording(_sharding.strategies)
    rank, world = int(argv[2]), int(argv[3])
    dist.init_process_group("gloo", rank=rank, world_size=world)
    try:
        model, ids = build()
        if mode == "2d":
            # data parallel (FSDP2) over tensor parallel: both data-parallel ranks get the same
            # batch, so the averaged gradients are the single-process ones
            mesh = init_device_mesh("cpu", (2, world // 2), mesh_dim_names=("dp", "tp"))
            parallelize_module(model, mesh["tp"], tensor_parallel_plan(len(model.model.layers)))
            shard_layers(model, mesh["dp"])
        elif mode == "fsdp":
            shard_layers(model, init_device_mesh("cpu", (world,)))
        else:
            parallelize_module(
                model, init_device_mesh("cpu", (world,)), tensor_parallel_plan(len(model.model.layers))
            )
        result = train(model, ids)
        if rank == 0:
            torch.save(result, out)
    finally:
        dist.destroy_process_group()


def leave_without_finalizing() -> None:
    """Ends a rank that finished cleanly, skipping the interpreter's finalization.

    A gloo worker thread frees each collective's work item after the work completes, and freeing
    its tensors takes the GIL. When the main thread's last collective returns just before the
    script ends, the worker can still be waiting for the GIL as finalization starts; CPython then
    ends the thread with ``pthread_exit``, whose unwinding through the work's ``noexcept``
    destructor calls ``std::terminate`` ("terminate called without an active exception", exit
    -6), in about one run in ten on 2 cores. Everything this process owes is written by now."""
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


if __name__ == "__main__":
    main(sys.argv[1:])
    if len(sys.argv) > 3:
        leave_without_finalizing()

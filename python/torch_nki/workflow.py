"""``torch-nki swap``: the whole profile → swap → verify → report workflow on a transformers
model built from a config (random weights, no downloads).

Steps: build the model, profile it (hotspots ranked and matched), swap and verify every matching
instance, compare the logits with the unswapped model, profile again, and write a Markdown report
with the before/after table and a PNG chart: the CPU time of the swapped modules before (ATen) and
after (the NKI simulator), next to the cost model's Trn2 estimate of the neuron ops that replace
them. ``transformers`` is imported here only.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

import torch_nki
from torch_nki._dtypes import NKI_TO_TORCH
from torch_nki.hotspots import HotspotReport

__all__ = ["MODELS", "SWAP_DTYPES", "build", "run"]

#: The kernel dtypes the workflow runs a model in (``--dtype``).
SWAP_DTYPES = ("f32", "bf16")


_LLAMA_SIZES: dict[str, dict[str, Any]] = {
    "llama-tiny": {
        "hidden_size": 64,
        "intermediate_size": 160,
        "num_hidden_layers": 2,
        "num_attention_heads": 4,
    },
    "llama-small": {
        "hidden_size": 256,
        "intermediate_size": 688,
        "num_hidden_layers": 4,
        "num_attention_heads": 8,
    },
    "llama-512": {
        "hidden_size": 512,
        "intermediate_size": 1376,
        "num_hidden_layers": 4,
        "num_attention_heads": 8,
    },
}

#: The sequence length of a preset's batch (2 sequences), where not 64.
SEQUENCE = {"llama-512": 128}


def _llama(preset: str) -> Any:
    import transformers

    size = _LLAMA_SIZES[preset]
    kv_heads = size["num_attention_heads"] // 2
    cfg = transformers.LlamaConfig(
        vocab_size=256, num_key_value_heads=kv_heads, max_position_embeddings=256, **size
    )
    return transformers.LlamaForCausalLM(cfg)


#: Model presets: name → builder (from a config, random weights).
MODELS: dict[str, Callable[[], Any]] = {name: functools.partial(_llama, name) for name in _LLAMA_SIZES}


def build(name: str, dtype: torch.dtype, seed: int = 0) -> tuple[torch.nn.Module, torch.Tensor]:
    """The preset model in eval mode and a batch of token ids for it."""
    if name not in MODELS:
        raise ValueError(f"unknown model `{name}` (known: {', '.join(MODELS)})")
    torch.manual_seed(seed)
    model = MODELS[name]().to(dtype).eval()
    shape = (2, SEQUENCE.get(name, 64))
    ids = torch.randint(0, model.config.vocab_size, shape, generator=torch.Generator().manual_seed(seed))
    return model, ids


def _median_ms(fn: Callable[[], object], repeat: int = 3) -> float:
    fn()
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    times.sort()
    return times[len(times) // 2] * 1e3


def _kinds(report: HotspotReport, names: set[str]) -> dict[str, float]:
    """Self CPU ms per adapter kind over the named module rows (children included via kinds)."""
    out: dict[str, float] = {}
    for h in report.modules:
        if h.name in names and h.kernel:
            kind = h.kernel.split(":")[0]
            out[kind] = out.get(kind, 0.0) + h.self_ms / report.steps
    return out


def _chart(before: dict[str, float], after: dict[str, float], device: dict[str, float], path: Path) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    kinds = sorted(before)
    fig, (cpu, trn) = plt.subplots(1, 2, figsize=(10, 4))
    xs = range(len(kinds))
    after_ms = [after.get(k, 0.0) for k in kinds]
    cpu.bar([x - 0.2 for x in xs], [before[k] for k in kinds], width=0.4, label="before (ATen, CPU)")
    cpu.bar([x + 0.2 for x in xs], after_ms, width=0.4, label="after (NKI simulator, CPU)")
    cpu.set_xticks(list(xs), kinds)
    cpu.set_ylabel("self time per forward, ms")
    cpu.set_title("CPU: swapped modules before and after")
    cpu.legend()
    trn.bar(list(xs), [device.get(k, 0.0) for k in kinds], color="tab:green")
    trn.set_xticks(list(xs), kinds)
    trn.set_ylabel("µs per forward (estimate)")
    trn.set_title("Trn2 cost model: the neuron ops")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def run(
    model_name: str,
    dtype_name: str,
    report_path: str | None,
    steps: int = 2,
    ratios: bool = True,
    n_busy: int = 1,
) -> int:
    """Runs the workflow and prints (or writes) the report; returns the exit code. With
    ``ratios``, then prints the whole-model ratios (:mod:`torch_nki.model_bench`: the forward in
    ``dtype_name`` and a training step, as the machine is and with ``n_busy`` busy processes)."""
    if dtype_name not in SWAP_DTYPES:
        print(f"torch-nki swap: unknown dtype `{dtype_name}` (known: {', '.join(SWAP_DTYPES)})")
        return 2
    try:
        model, ids = build(model_name, NKI_TO_TORCH[dtype_name])
    except ValueError as problem:
        print(f"torch-nki swap: {problem}")
        return 2
    print(f"== {model_name} ({dtype_name}): profile")
    before = torch_nki.profile(model, ids, steps=steps)
    with torch.no_grad():
        want = model(ids).logits
        t_before = _median_ms(lambda: model(ids))
    print(before.to_markdown(top=10))
    print("== swap and verify")
    swapped = torch_nki.swap(model, before)
    print(swapped.to_markdown())
    with torch.no_grad():
        got = model(ids).logits
        t_after = _median_ms(lambda: model(ids))
    err = float((got.float() - want.float()).abs().max())
    tol = 1e-3 if dtype_name == "f32" else 1e-1
    after = torch_nki.profile(model, ids, steps=steps)
    names = {e.name for e in swapped.swapped}
    device: dict[str, float] = {}
    for h in before.modules:
        if h.name in names and h.kernel and h.device_us is not None:
            kind = h.kernel.split(":")[0]
            device[kind] = device.get(kind, 0.0) + h.device_us
    lines = [
        f"# torch-nki swap: {model_name} ({dtype_name})",
        "",
        f"- swapped {len(swapped.swapped)} module instances, reverted {len(swapped.reverted)}",
        f"- logits max abs difference after the swap: {err:.3g} (tolerance {tol:g})",
        f"- model forward on CPU: {t_before:.1f} ms before, {t_after:.1f} ms after (the NKI simulator)",
        "",
        "| module kind | CPU ms before (ATen) | CPU ms after (simulator) | Trn2 µs (estimate) |",
        "|---|---|---|---|",
    ]
    kinds_before, kinds_after = _kinds(before, names), _kinds(after, names)
    for kind in sorted(kinds_before):
        cpu_after, trn = kinds_after.get(kind, 0.0), device.get(kind, 0.0)
        lines.append(f"| {kind} | {kinds_before[kind]:.2f} | {cpu_after:.2f} | {trn:.1f} |")
    lines += ["", swapped.to_markdown(), before.to_markdown(top=15)]
    if report_path:
        out = Path(report_path)
        out.parent.mkdir(parents=True, exist_ok=True)
        chart = _chart(kinds_before, kinds_after, device, out.with_suffix(".png"))
        lines.insert(6, f"![before and after]({chart.name})\n")
        out.write_text("\n".join(lines) + "\n", encoding="utf-8")
        print(f"report: {out} (chart: {chart})")
    else:
        print("\n".join(lines[: 8 + len(kinds_before)]))
    ok = not swapped.reverted and err <= tol
    if ratios and ok:
        from torch_nki import model_bench

        print("== whole-model ratios")
        cases = [c for c in model_bench.CASES if c[0] != "forward" or c[1] == dtype_name]
        rows = model_bench.print_ratios([model_name], n_busy, cases=cases)
        if report_path:
            table = "\n".join([model_bench.HEADER, *(r.line() for r in rows)])
            title = f"## Whole-model ratios (swapped / unswapped, {model_bench.load()})"
            section = f"\n{title}\n\n```text\n{table}\n```\n"
            with Path(report_path).open("a", encoding="utf-8") as f:
                f.write(section)
    print("== OK" if ok else "== FAILED: see the report")
    return 0 if ok else 1

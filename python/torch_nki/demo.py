"""``torch-nki demo``: every op with a reference, on its largest declared sample, eager and
``torch.compile(fullgraph=True)``, compared with its ATen reference and timed against it.

The ops, shapes, references and tolerances come from the registry (``torch_nki.testing``): a
new kernel shows up here without editing this file, and so do the kernels of crates loaded with
``torch_nki.load`` (``torch-nki --load PATH demo``).
"""

from __future__ import annotations

import functools
import statistics
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import torch

from torch_nki import testing

#: How long :func:`median_times` runs both callables, in turn, before it times them.
WARM_UP_SECONDS = 0.1


def median_times(a: Callable[[], object], b: Callable[[], object], repeat: int) -> tuple[float, float]:
    """Median wall times of ``a()`` and ``b()`` in seconds: three rounds, each timing a block of
    calls of ``a`` and then a block of ``b``, so drift on a shared machine affects both alike.

    Both first run in turn for :data:`WARM_UP_SECONDS` (at least once each): a 130 x 4100 add,
    ATen's or the simulator's, took 1.5-2x its steady time for its first hundred or so calls in
    a fresh process (docs/cli.md), which fell on whichever op a run times first.

    Blocks rather than strict A/B alternation: ATen's OpenMP workers spin for a while after each
    ATen op and slow down a simulator call that follows immediately (see docs/cli.md); within a
    block only the first call pays that.
    """
    start = time.perf_counter()
    while True:
        a()
        b()
        if time.perf_counter() - start >= WARM_UP_SECONDS:
            break
    ta: list[float] = []
    tb: list[float] = []
    per_block = max(1, -(-repeat // 3))
    for _ in range(3):
        for fn, out in ((a, ta), (b, tb)):
            for _ in range(per_block):
                start = time.perf_counter()
                fn()
                out.append(time.perf_counter() - start)
    return statistics.median(ta), statistics.median(tb)


def _fmt_time(seconds: float) -> str:
    return f"{seconds * 1e3:8.3f} ms"


def _largest(op: str, dtype: torch.dtype) -> testing.SampleInput | None:
    samples = testing.sample_inputs(op, dtypes=[dtype])
    return max(samples, key=lambda s: sum(t.numel() for t in s.tensors), default=None)


def _shape_text(sample: testing.SampleInput) -> str:
    return ", ".join("x".join(map(str, t.shape)) or "[]" for t in sample.tensors)


def _within(
    sample: testing.SampleInput, actual: tuple[torch.Tensor, ...], expected: tuple[torch.Tensor, ...]
) -> bool:
    try:
        testing.assert_close(sample, actual, expected)
    except AssertionError:
        return False
    return True


def run(compile: bool = True, repeat: int = 15, threads: int | None = None) -> int:
    """Runs every op with a reference in fp32 and bf16 (where its contract allows); prints a
    table; returns 0 if every check passed. ``threads`` sets torch's intra-op threads for the
    run (ATen's OpenMP workers skew the ratios on a loaded machine; docs/bench.md, "Small
    shapes")."""
    with torch_threads(threads):
        return _run(compile, repeat)


@contextmanager
def torch_threads(threads: int | None) -> Iterator[None]:
    """torch's intra-op threads set to ``threads`` for the duration (``None``: left as they are),
    then put back."""
    previous = torch.get_num_threads()
    if threads is not None:
        torch.set_num_threads(threads)
    try:
        yield
    finally:
        torch.set_num_threads(previous)


def _run(compile: bool, repeat: int) -> int:
    failures: list[str] = []
    ops = testing.ops_with_reference()  # loaded crates' too, as ns::name
    width = max([10, *(len(op) for op in ops)])
    header = f"{'op':{width}} {'dtype':9} {'shapes':26} {'mode':8} {'max abs err':>12} {'result':6}"
    print(header + f" {'neuron':>11} {'aten':>11} {'neuron/aten':>11}")
    print("-" * (len(header) + 36))
    for op in ops:
        packet = testing.torch_op(op)

        def neuron(*args: Any, packet: Any = packet) -> Any:
            return packet(*args)

        # One wrapper code object serves every op: reset Dynamo's caches per op, so the
        # recompile limit counts one op's dtypes, not the whole library's.
        torch._dynamo.reset()
        compiled = torch.compile(neuron, fullgraph=True) if compile else None
        for dtype in (torch.float32, torch.bfloat16):
            dtype_name = str(dtype)[6:]
            sample = _largest(op, dtype)
            if sample is None:
                continue
            expected = testing.reference(sample)
            modes: list[tuple[str, Callable[..., Any]]] = [("eager", neuron)]
            if compiled is not None:
                modes.append(("compile", compiled))
            for mode, fn in modes:
                actual = testing.public_outputs(fn(*sample.args))
                err = max(
                    (a.double() - e.double()).abs().max().item()
                    for a, e in zip(actual, expected, strict=True)
                )
                ok = _within(sample, actual, expected)
                if not ok:
                    failures.append(f"{op} {dtype_name} {mode}")
                line = (
                    f"{op:{width}} {dtype_name:9} {_shape_text(sample):26} {mode:8} {err:12.3e} "
                    f"{'PASS' if ok else 'FAIL':6}"
                )
                t_neuron, t_aten = median_times(
                    functools.partial(fn, *sample.args),
                    functools.partial(testing.reference, sample),
                    repeat,
                )
                line += f" {_fmt_time(t_neuron)} {_fmt_time(t_aten)} {t_neuron / t_aten:10.2f}x"
                print(line, flush=True)
    # The failed rows again, last: a view of the output's tail still says which they were.
    verdict = f"{len(failures)} check(s) FAILED: {', '.join(failures)}" if failures else "all checks passed"
    print(
        f"\n{verdict} (each op within its declared tolerance class; `aten` times the op's reference "
        "expression, eagerly in both modes)"
    )
    return 1 if failures else 0

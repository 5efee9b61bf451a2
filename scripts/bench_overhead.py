"""Per-call overhead of a ``torch.ops.neuron`` op against a raw ``torch.library`` op.

Prints the time of an eager 4x4 ``torch.ops.neuron.add`` next to a raw ``define``/``impl``
Python op that does nothing (returns its input), and the ratio between them, measured in
alternating blocks in the same process (the machine's load moves both; the ratio is the median
of the per-pair ratios): without grad, and recording autograd (inputs that require grad, against
a raw op with a registered autograd formula). Each ratio is measured twice, on the machine as it
is and with a competing busy process this script starts (``--busy N`` of them, default 1) and
stops. Targets (issue 34): <= 2x without grad, <= 1.5x recording autograd.

With ``--breakdown``, also the pieces of the call (the Python CPU kernel the fast path falls back
to, ``Signature.run`` alone, the output allocation, ATen's add), best of several blocks. With
``--split``, the threshold on a run's size above which the simulator hands it to its threads
(``_native.split_min_work()``): for ``neuron.add`` on growing square shapes, the time with every
run handed to the pool, and with the default policy (the threshold, and the pool only while a
core is free), each over the time with every run on the calling thread, idle and busy.

With ``--compiled``, small graphs of neuron ops under ``torch.compile(fullgraph=True)`` against
the same calls made eagerly (issue 34: compiling adds no per-call cost beyond the eager path).

    python scripts/bench_overhead.py [--calls N] [--rounds N] [--busy N] [--breakdown] [--split] [--compiled]
"""

from __future__ import annotations

import argparse
import functools
import statistics
import time
from collections.abc import Callable

import torch

import torch_nki
from torch_nki import _native
from torch_nki.model_bench import busy, load

Call = Callable[[], object]


def block_us(fn: Call, calls: int) -> float:
    """Mean time per call of ``fn`` over ``calls`` calls, in µs."""
    start = time.perf_counter()
    for _ in range(calls):
        fn()
    return (time.perf_counter() - start) / calls * 1e6


def best_us(fn: Call, calls: int, blocks: int = 7) -> float:
    """Best per-call time of ``fn`` over ``blocks`` blocks of ``calls`` calls, in µs."""
    block_us(fn, max(calls // 10, 1))
    return min(block_us(fn, calls) for _ in range(blocks))


def paired(ours: Call, peer: Call, calls: int, rounds: int) -> tuple[float, float, float]:
    """``(median µs ours, median µs peer, median of the per-round ratios)``: the two timed in
    alternating blocks, so both see the same machine."""
    block_us(ours, max(calls // 10, 1))
    block_us(peer, max(calls // 10, 1))
    a, b = [], []
    for _ in range(rounds):
        a.append(block_us(ours, calls))
        b.append(block_us(peer, calls))
    ratios = [x / y for x, y in zip(a, b, strict=True)]
    return statistics.median(a), statistics.median(b), statistics.median(ratios)


@functools.cache
def raw_ops() -> tuple[Callable[..., torch.Tensor], Callable[..., torch.Tensor]]:
    """A raw op returning its first input, and one with an autograd formula (passes the
    gradient to both inputs) registered the same way (once per process)."""
    lib = torch.library.Library("overhead_bench", "DEF")
    lib.define("noop(Tensor x, Tensor y) -> Tensor")
    lib.impl("noop", lambda x, y: x, "CPU")
    lib.define("noop_grad(Tensor x, Tensor y) -> Tensor")
    lib.impl("noop_grad", lambda x, y: x.clone(), "CPU")
    torch.library.register_autograd(
        "overhead_bench::noop_grad",
        lambda ctx, grad: (grad, grad),
        setup_context=lambda ctx, inputs, output: None,
        lib=lib,
    )
    raw_ops.lib = lib  # type: ignore[attr-defined]  # keep the registrations alive
    return torch.ops.overhead_bench.noop, torch.ops.overhead_bench.noop_grad


def ratios(calls: int, rounds: int, n_busy: int) -> None:
    raw, raw_grad = raw_ops()
    add = torch.ops.neuron.add
    x, y = torch.rand(4, 4), torch.rand(4, 4)
    xg, yg = x.clone().requires_grad_(), y.clone().requires_grad_()
    cases = [
        ("no grad", lambda: add(x, y), lambda: raw(x, y), 2.0),
        ("autograd recording", lambda: add(xg, yg), lambda: raw_grad(xg, yg), 1.5),
    ]
    print(f"per-call time, 4x4 float32, {calls} calls per block, {rounds} alternating rounds")
    print(f"{'machine':<28} {'case':<20} {'neuron.add':>11} {'raw op':>9} {'ratio':>7} target")
    for state in ("as it is", f"{n_busy} busy process(es)"):
        with busy(n_busy if state != "as it is" else 0):
            state_line = f"{state} ({load()})"
            for name, ours, peer, target in cases:
                with torch.no_grad() if name == "no grad" else torch.enable_grad():
                    a, b, r = paired(ours, peer, calls, rounds)
                verdict = "ok" if r <= target else "OVER"
                print(f"{state:<28} {name:<20} {a:9.2f}us {b:7.2f}us {r:6.2f}x <= {target}x {verdict}")
            print(f"  {state_line}")


def compiled(calls: int, rounds: int, n_busy: int) -> None:
    """Per-call time of small-op graphs under ``torch.compile`` against the same ops called
    eagerly one by one: what compiling adds (or saves) per call."""
    neuron = torch.ops.neuron
    x, w = torch.rand(4, 4), torch.rand(4)

    def one(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return neuron.add(a, b)

    def chain(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return neuron.silu(neuron.rmsnorm(neuron.add(a, a), b))

    graphs = [("add (1 op)", one, (x, x)), ("add, rmsnorm, silu (3 ops)", chain, (x, w))]
    print(f"compiled graph vs eager, 4x4 float32, {calls} calls per block, {rounds} alternating rounds")
    print(f"{'machine':<22} {'graph':<28} {'compiled':>11} {'eager':>9} {'ratio':>7}")
    for state in ("as it is", f"{n_busy} busy"):
        with busy(n_busy if state != "as it is" else 0), torch.no_grad():
            for name, fn, args in graphs:
                torch._dynamo.reset()
                graph = torch.compile(fn, fullgraph=True, dynamic=False)
                graph(*args)
                a, b, r = paired(lambda g=graph, a=args: g(*a), lambda f=fn, a=args: f(*a), calls, rounds)
                print(f"{state:<22} {name:<28} {a:9.2f}us {b:7.2f}us {r:6.2f}x")
            print(f"  ({load()})")


def pooled_us(fn: Call, calls: int) -> float:
    """:func:`best_us` with every run handed to the simulator's threads, as before the
    threshold."""
    default = _native.split_min_work()
    _native.split_min_work(0)
    try:
        return best_us(fn, calls)
    finally:
        _native.split_min_work(default)


def breakdown(calls: int) -> None:
    from torch_nki._kernels import make_cpu_kernel

    raw, _ = raw_ops()
    spec = torch_nki._registration().ops["add"]
    cpu_kernel = make_cpu_kernel(spec, _native)
    x, y, out = torch.rand(4, 4), torch.rand(4, 4), torch.empty(4, 4)
    sig = _native.Signature("add", [[4, 4], [4, 4]], ["f32", "f32"], [])
    add = torch.ops.neuron.add
    with torch.no_grad():
        rows = [
            ("raw torch.library op (define/impl, returns x)", best_us(lambda: raw(x, y), calls)),
            ("torch.ops.neuron.add(x, y)", best_us(lambda: add(x, y), calls)),
            (
                "  the same, the run handed to the pool (split_min_work(0))",
                pooled_us(lambda: add(x, y), calls),
            ),
            ("  its Python CPU kernel (the fallback), directly", best_us(lambda: cpu_kernel(x, y), calls)),
            (
                "  Signature.run alone (compiled, 4x4 simulated)",
                best_us(lambda: sig.run([x, y], [out]), calls),
            ),
            ("  torch.empty(4, 4) (the output)", best_us(lambda: torch.empty(4, 4), calls)),
            ("aten add(x, y)", best_us(lambda: torch.add(x, y), calls)),
        ]
    width = max(len(name) for name, _ in rows)
    print(f"best block of {calls} calls ({load()})")
    for name, us in rows:
        print(f"  {name:<{width}}  {us:7.2f} us")


def timed_add(min_work: int, x: torch.Tensor, y: torch.Tensor, calls: int) -> float:
    """µs per ``neuron.add(x, y)`` with ``split_min_work(min_work)``."""
    _native.split_min_work(min_work)
    return block_us(lambda: torch.ops.neuron.add(x, y), calls)


def split(rounds: int, n_busy: int, sizes: list[int]) -> None:
    default = _native.split_min_work()
    never = 2**64 - 2
    print(
        f"split_min_work() = {default}; time with every run on the pool, and with the default "
        "policy (the threshold, and a core free), over every run on the caller"
    )
    print(
        f"{'machine':<22} {'shape':>9} {'work':>10} {'caller':>10} {'pool':>10} {'pool/caller':>11} "
        f"{'default':>10} {'default/caller':>14}"
    )
    try:
        for state in ("as it is", f"{n_busy} busy"):
            with busy(n_busy if state != "as it is" else 0):
                # The default policy judges other processes' work over 100 ms windows: calls
                # large enough to ask it for 0.3 s first, so that it sees this machine state.
                _native.split_min_work(default)
                warm = torch.rand(512, 512)
                until = time.perf_counter() + 0.3
                while time.perf_counter() < until:
                    torch.ops.neuron.add(warm, warm)
                for n in sizes:
                    x, y = torch.rand(n, n), torch.rand(n, n)
                    work = _native.Signature("add", [[n, n], [n, n]], ["f32", "f32"], []).work()
                    calls = max(3, 200_000 // (n * n))

                    with torch.no_grad():
                        a, b, d = [], [], []
                        for _ in range(rounds):
                            a.append(timed_add(never, x, y, calls))
                            b.append(timed_add(0, x, y, calls))
                            d.append(timed_add(default, x, y, calls))
                    r = statistics.median([p / c for c, p in zip(a, b, strict=True)])
                    rd = statistics.median([p / c for c, p in zip(a, d, strict=True)])
                    print(
                        f"{state:<22} {f'{n}x{n}':>9} {work:>10} {statistics.median(a):8.1f}us "
                        f"{statistics.median(b):8.1f}us {r:10.2f}x {statistics.median(d):8.1f}us {rd:13.2f}x"
                    )
                print(f"  ({load()})")
    finally:
        _native.split_min_work(default)


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--calls", type=int, default=5_000, help="calls per timed block")
    parser.add_argument("--rounds", type=int, default=7, help="alternating rounds per ratio")
    parser.add_argument("--busy", type=int, default=1, help="competing busy processes for the loaded run")
    parser.add_argument("--breakdown", action="store_true", help="also time the pieces of a call")
    parser.add_argument("--split", action="store_true", help="measure the simulator's split threshold")
    parser.add_argument(
        "--compiled", action="store_true", help="also time torch.compile graphs of small ops against eager"
    )
    parser.add_argument(
        "--sizes", default="16,64,256,1024,2048,4096", help="--split: square add shapes (comma-separated)"
    )
    args = parser.parse_args()
    state = "enabled" if torch_nki._fast.enabled() else "DISABLED (Python kernels)"
    print(f"fast path {state}; split_min_work() = {_native.split_min_work()}")
    ratios(args.calls, args.rounds, args.busy)
    if args.breakdown:
        breakdown(args.calls)
    if args.compiled:
        compiled(args.calls, args.rounds, args.busy)
    if args.split:
        split(args.rounds, args.busy, [int(n) for n in args.sizes.split(",")])
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

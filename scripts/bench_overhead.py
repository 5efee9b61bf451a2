"""Per-call overhead of a ``torch.ops.neuron`` op against a raw ``torch.library`` op.

Prints the time of an eager 4x4 ``torch.ops.neuron.add`` without grad next to a raw
``define``/``impl`` Python op that does nothing (returns its input), the ratio between them
(the target is <= 2x), and for comparison the op's Python kernels (what runs without the fast
C++ kernels, see ``torch_nki._fast``): the CPU kernel called directly, the native ``run`` alone,
and the output allocation. Timings are the best of several blocks, so they are floors; the
machine's load moves them all together.

    python scripts/bench_overhead.py [--calls N]
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable

import torch

import torch_nki
from torch_nki import _native


def best_us(fn: Callable[[], object], calls: int, blocks: int = 7) -> float:
    """Best per-call time of ``fn`` over ``blocks`` blocks of ``calls`` calls, in µs."""
    for _ in range(calls // 10):
        fn()
    best = float("inf")
    for _ in range(blocks):
        start = time.perf_counter()
        for _ in range(calls):
            fn()
        best = min(best, (time.perf_counter() - start) / calls)
    return best * 1e6


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--calls", type=int, default=20_000, help="calls per timed block")
    args = parser.parse_args()
    lib = torch.library.Library("overhead_bench", "DEF")
    lib.define("noop(Tensor x, Tensor y) -> Tensor")
    lib.impl("noop", lambda x, y: x, "CPU")
    raw = torch.ops.overhead_bench.noop
    add = torch.ops.neuron.add
    spec = torch_nki._registration().ops["add"]
    from torch_nki._kernels import make_cpu_kernel

    cpu_kernel = make_cpu_kernel(spec, _native)
    x, y, out = torch.rand(4, 4), torch.rand(4, 4), torch.empty(4, 4)
    n = args.calls

    sig = _native.Signature("add", [[4, 4], [4, 4]], ["f32", "f32"], [])

    def native_run() -> None:
        sig.run([x, y], [out])

    with torch.no_grad():
        rows = [
            ("raw torch.library op (define/impl, returns x)", best_us(lambda: raw(x, y), n)),
            ("torch.ops.neuron.add(x, y)", best_us(lambda: add(x, y), n)),
            ("  its Python CPU kernel (the fallback), directly", best_us(lambda: cpu_kernel(x, y), n)),
            ("  Signature.run alone (compiled, 4x4 simulated)", best_us(native_run, n)),
            ("  torch.empty(4, 4) (the output)", best_us(lambda: torch.empty(4, 4), n)),
            ("aten add(x, y)", best_us(lambda: torch.add(x, y), n)),
        ]
    width = max(len(name) for name, _ in rows)
    state = "enabled" if torch_nki._fast.enabled() else "DISABLED (Python kernels)"
    print(f"per-call time, 4x4 float32, no grad ({n} calls per block, best block); fast path {state}")
    for name, us in rows:
        print(f"  {name:<{width}}  {us:7.2f} us")
    ratio = rows[1][1] / rows[0][1]
    print(f"ratio torch.ops.neuron.add / raw op: {ratio:.1f}x (target <= 2x)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

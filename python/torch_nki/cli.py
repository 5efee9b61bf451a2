"""The ``torch-nki`` command line: ``list`` the registry, run the ``demo``."""

from __future__ import annotations

import argparse
from collections.abc import Sequence

import torch_nki


def print_registry() -> None:
    """Prints every registered op: name, schema, contract and dtypes (rendered by Rust), source
    location, the doc's first paragraph, backward and saved outputs, and what it replaces."""
    ops = torch_nki._registration().ops
    print(f"torch-nki {torch_nki.__version__}: {len(ops)} ops in torch.ops.neuron")
    for name in sorted(ops):
        spec = ops[name]
        print(f"\ntorch.ops.neuron.{name}")
        print(f"  schema:   {spec.schema}")
        print(f"  contract: {spec.contract_text}")
        print(f"  dtypes:   {spec.dtype_text}")
        print(f"  defined:  {spec.location}")
        print(f"  doc:      {spec.summary}")
        if spec.forward_op:
            print(f"  saved outputs: returned by torch.ops.neuron.{spec.forward_op[0]}")
        if spec.backward:
            print(f"  backward: {spec.backward.kernel} (saves {', '.join(spec.backward.saves) or 'nothing'})")
        if spec.backward_of:
            print(f"  backward of: {spec.backward_of}")
        if spec.replaces:
            print(f"  replaces: {', '.join(spec.replaces)}")


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``torch-nki`` and ``python -m torch_nki``; returns the exit code."""
    parser = argparse.ArgumentParser(
        prog="torch-nki", description="NKI kernels in Rust, as torch.ops.neuron.*"
    )
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("list", help="print the registered ops")
    demo = sub.add_parser("demo", help="run every op eagerly and compiled, compare with ATen, time both")
    demo.add_argument("--no-compile", action="store_true", help="skip torch.compile(fullgraph=True)")
    demo.add_argument(
        "--repeat",
        type=int,
        default=15,
        help="timed calls per measurement (median of three alternating blocks)",
    )
    args = parser.parse_args(argv)
    if args.command == "list":
        print_registry()
        return 0
    from torch_nki import demo as demo_mod

    print_registry()
    print()
    return demo_mod.run(compile=not args.no_compile, repeat=max(1, args.repeat))

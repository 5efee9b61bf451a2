"""The ``torch-nki`` command line: ``list`` the registry, run the ``demo``, ``cost`` an op or
``emit`` its NKI source, ``bench`` every op, write the op ``table`` or the NKI ``coverage``
table, manage the source ``cache``, ``swap`` kernels into a model, run a directory of NKI kernels
against their references (``conformance``), build the ``fast`` C++ kernels. Usage errors print
``torch-nki COMMAND: ...`` and exit 2.

Every command prints only its own output: what other libraries write while it runs (the
profiler's C++ log lines) is captured (:mod:`torch_nki._quiet`); ``-v`` shows it."""

from __future__ import annotations

import argparse
import math
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch_nki
from torch_nki.errors import NkiError, UnknownOpError


def print_registry() -> None:
    """Prints every registered op (the package's, then each loaded module's): name, schema,
    contract and dtypes (rendered by Rust), source location, the doc's first paragraph, backward
    and saved outputs, and what it replaces."""
    from torch_nki._register import registrations

    torch_nki._registration()
    for i, reg in enumerate(registrations()):
        source = "torch-nki" if i == 0 else reg.native.__name__
        version = f" {torch_nki.__version__}" if i == 0 else f" ({reg.native.__file__})"
        if i:
            print()
        print(f"{source}{version}: {len(reg.ops)} ops in torch.ops.{reg.namespace}")
        _print_ops(reg.ops, reg.namespace)


def _print_ops(ops: dict[str, Any], ns: str) -> None:
    for name in sorted(ops):
        spec = ops[name]
        print(f"\ntorch.ops.{ns}.{name}")
        print(f"  schema:   {spec.schema}")
        print(f"  contract: {spec.contract_text}")
        print(f"  dtypes:   {spec.dtype_text}")
        print(f"  defined:  {spec.location}")
        print(f"  doc:      {spec.summary}")
        if spec.forward_op:
            print(f"  saved outputs: returned by torch.ops.{ns}.{spec.forward_op[0]}")
        if spec.backward:
            print(f"  backward: {spec.backward.kernel} (saves {', '.join(spec.backward.saves) or 'nothing'})")
        if spec.backward_of:
            print(f"  backward of: {spec.backward_of}")
        if spec.replaces:
            print(f"  replaces: {', '.join(spec.replaces)}")


class _BadArgument(Exception):
    """A command-line value that cannot be used; the message says which and why."""


_USAGE_ERRORS = (NkiError, ValueError, TypeError, OverflowError)
"""What ``cost``/``emit`` raise for arguments they cannot use (a contract violation, a scalar
outside its choices, a size that does not fit): one line and exit code 2, not a traceback."""


def _parse_pairs(items: Sequence[str], what: str) -> dict[str, str]:
    pairs: dict[str, str] = {}
    for item in items:
        name, sep, value = item.partition("=")
        if not sep or not name or not value:
            raise _BadArgument(f"--{what} takes NAME=VALUE, got {item!r}")
        pairs[name] = value
    return pairs


_MAX_ELEMENTS = 2**63 - 1
"""The most elements a tensor can have (torch counts them in an int64)."""


def _dims(name: str, text: str) -> list[int]:
    """``8x4`` as ``[8, 4]``: sizes of zero or more, whose product fits an int64."""
    try:
        dims = [int(d) for d in text.split("x")]
    except ValueError:
        dims = [-1]
    if any(d < 0 for d in dims):
        raise _BadArgument(f"--shape {name}: expected sizes like 8x4 (each 0 or more), got {text!r}")
    if any(d > _MAX_ELEMENTS for d in dims) or math.prod(dims) > _MAX_ELEMENTS:
        raise _BadArgument(
            f"--shape {name}: {text} has {math.prod(dims)} elements, more than a tensor can hold (2**63 - 1)"
        )
    return dims


def _scalar(name: str, kind: str, raw: str) -> object:
    """A ``--scalar`` value of a parameter of ``kind`` (``bool``, ``int``, else float)."""
    try:
        if kind == "bool":
            if raw not in ("true", "false"):
                raise ValueError(raw)
            return raw == "true"
        return int(raw) if kind == "int" else float(raw)
    except ValueError:
        wanted = {"bool": "true or false", "int": "an integer"}.get(kind, "a number")
        raise _BadArgument(f"--scalar {name}: expected {wanted}, got {raw!r}") from None


def _example_args(
    command: str, op: str, shapes: Sequence[str], scalars: Sequence[str], dtype: str
) -> list[object] | None:
    """``op``'s arguments in parameter order: meta tensors of the given shapes (``None`` for an
    optional tensor left out) and the given scalars or their defaults. Positional, since a
    parameter may share a name with a keyword of ``cost``/``emit`` (cross_entropy's ``target``).
    Prints what is wrong and returns ``None`` for an unknown op or dtype, a missing shape or
    scalar, a value that does not parse, or an unknown parameter."""
    try:
        return _example_args_or_raise(op, shapes, scalars, dtype)
    except (_BadArgument, UnknownOpError) as e:
        print(f"torch-nki {command}: {e}")
        return None


def _example_args_or_raise(
    op: str, shapes: Sequence[str], scalars: Sequence[str], dtype: str
) -> list[object]:
    import torch

    from torch_nki._dtypes import NKI_TO_TORCH
    from torch_nki.testing import _lookup, fixed_dtype

    _, spec = _lookup(op)
    if dtype not in NKI_TO_TORCH:
        raise _BadArgument(f"unknown dtype `{dtype}` (known: {', '.join(NKI_TO_TORCH)})")
    given = _parse_pairs(shapes, "shape")
    values = _parse_pairs(scalars, "scalar")
    by_name: dict[str, object] = {}
    for p in spec.params:
        if p.is_tensor:
            if p.name in given:
                given_text = given.pop(p.name)
                dims = _dims(p.name, given_text)
                # A parameter whose contract allows one dtype (`mean in {f32}`, class targets
                # in {i32}, which callers pass as int64) gets that one whatever --dtype says.
                fixed = fixed_dtype(spec, p.name)
                torch_dtype = (
                    torch.int64 if fixed == "i32" else NKI_TO_TORCH[fixed] if fixed else NKI_TO_TORCH[dtype]
                )
                try:
                    by_name[p.name] = torch.empty(dims, dtype=torch_dtype, device="meta")
                except RuntimeError as err:  # more bytes than an int64 counts
                    raise _BadArgument(f"--shape {p.name}: {given_text} is too large: {err}") from None
            elif p.is_optional:
                by_name[p.name] = None
            else:
                hint = f"--shape {p.name}=AxB (schema: {spec.schema})"
                raise _BadArgument(f"give the shape of `{p.name}`: {hint}")
        elif p.name in values:
            raw = values.pop(p.name)
            if p.is_optional and raw == "none":
                by_name[p.name] = None
            elif p.kind == "str":
                by_name[p.name] = raw
            else:
                by_name[p.name] = _scalar(p.name, p.kind, raw)
        elif p.has_default:
            by_name[p.name] = p.default
        else:
            hint = f"--scalar {p.name}=VALUE (schema: {spec.schema})"
            raise _BadArgument(f"give the value of `{p.name}`: {hint}")
    unknown = sorted(given) + sorted(values)
    if unknown:
        raise _BadArgument(f"`{op}` has no parameter {', '.join(unknown)} (schema: {spec.schema})")
    return [by_name[p.name] for p in spec.params]


def run_cost(
    op: str,
    shapes: Sequence[str],
    scalars: Sequence[str],
    dtype: str,
    target: str,
    trace: str | None,
    plot: str | None = None,
) -> int:
    """``torch-nki cost``: builds meta tensors of the given shapes and prints the estimate."""
    args = _example_args("cost", op, shapes, scalars, dtype)
    if args is None:
        return 2
    try:
        report = torch_nki.cost(op, *args, target=target)
    except _USAGE_ERRORS as e:
        print(f"torch-nki cost: {e}")
        return 2
    print(report, end="")
    try:
        if trace:
            print(f"  trace: {report.write_trace(trace)} (open in https://ui.perfetto.dev)")
        if plot:
            print(f"  plot: {report.write_plot(plot)}")
    except (ImportError, OSError) as e:
        print(f"torch-nki cost: {e}")
        return 2
    return 0


def run_emit(
    op: str, shapes: Sequence[str], scalars: Sequence[str], dtype: str, target: str, output: str | None
) -> int:
    """``torch-nki emit``: prints (or writes) the op's NKI Python source for the given shapes."""
    args = _example_args("emit", op, shapes, scalars, dtype)
    if args is None:
        return 2
    try:
        source = torch_nki.emit(op, *args, target=target)
    except _USAGE_ERRORS as e:
        print(f"torch-nki emit: {e}")
        return 2
    if output:
        try:
            Path(output).write_text(source)
        except OSError as e:
            print(f"torch-nki emit: cannot write {output}: {e.strerror or e}")
            return 2
        print(f"wrote {output}")
    else:
        print(source, end="")
    return 0


def run_cache(action: str) -> int:
    """``torch-nki cache info|clear|path``."""
    from torch_nki import source_cache

    if action == "path":
        print(source_cache.path())
        return 0
    try:
        if action == "clear":
            print(f"removed {source_cache.clear()} entries from {source_cache.path()}")
        else:
            entries, size = source_cache.info()
            print(f"{source_cache.path()}: {entries} entries, {size} bytes")
    except OSError as e:
        print(f"torch-nki cache {action}: {source_cache.path()}: {e.strerror or e}")
        return 2
    return 0


def run_conformance(
    path: str, target: str, markdown: bool, json_path: str | None, verbose: bool, timeout: float | None
) -> int:
    """``torch-nki conformance``: runs every kernel under ``path``, prints the table and the
    summary (and with ``verbose`` each file's captured output first)."""
    import json
    import sys

    from torch_nki import conformance

    if not Path(path).exists():
        print(f"torch-nki conformance: {path}: no such file or directory")
        return 2
    progress = (
        (lambda rel: print(f"running {rel}", file=sys.stderr, flush=True)) if sys.stderr.isatty() else None
    )
    report = conformance.run(path, target=target, timeout=timeout, progress=progress)
    if verbose:
        for run in report.files:
            status = "completed" if run.completed else run.error
            print(f"--- {run.file} ({run.role}, {run.seconds:.1f} s): {status}")
            if run.output:
                print(run.output, end="" if run.output.endswith("\n") else "\n")
        print()
    print(report.markdown() if markdown else report.table(), end="")
    print()
    print(report.summary())
    if json_path:
        try:
            Path(json_path).write_text(json.dumps(report.to_json(), indent=1) + "\n", encoding="utf-8")
        except OSError as e:
            print(f"torch-nki conformance: cannot write {json_path}: {e.strerror or e}")
            return 2
    return 0


def run_nkilib_suite(args: argparse.Namespace) -> int:
    """``torch-nki nkilib-suite``: runs nki-library's tests on torch-nki, prints the report."""
    from torch_nki import nkilib_suite

    try:
        report = nkilib_suite.run(
            Path(args.path),
            platform=args.platform,
            tests=args.tests,
            select=args.select,
            every=args.every,
            jobs=args.jobs,
            timeout=args.timeout,
            memory_gib=args.memory or None,
            log=Path(args.log) if args.log else None,
        )
    except (FileNotFoundError, RuntimeError) as e:
        print(f"torch-nki nkilib-suite: {e}")
        return 2
    text = report.markdown()
    print(text, end="")
    if args.output:
        Path(args.output).write_text(text, encoding="utf-8")
    return 0


def run_nkilib_versus(args: argparse.Namespace) -> int:
    """``torch-nki nkilib-versus``: the side-by-side estimates with nki-library's kernels."""
    from torch_nki.nkilib_suite import versus

    try:
        rows = versus.compare(Path(args.path), target=args.target)
    except FileNotFoundError as e:
        print(f"torch-nki nkilib-versus: {e}")
        return 2
    text = versus.markdown(rows, args.target)
    print(text, end="")
    if args.output:
        Path(args.output).write_text(text, encoding="utf-8")
    return 0


def _seconds(text: str) -> float:
    """An argparse type: a number of seconds above 0."""
    try:
        value = float(text)
    except ValueError:
        value = 0.0
    if not value > 0:
        raise argparse.ArgumentTypeError(f"expected a number of seconds above 0, got {text!r}")
    return value


def _gibibytes(text: str) -> float:
    """An argparse type: a number of GiB, at least 0 (0: no limit)."""
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not value >= 0:
        raise argparse.ArgumentTypeError(f"expected a number of GiB, at least 0, got {text!r}")
    return value


def _positive(text: str) -> int:
    """An argparse type: a whole number of at least 1."""
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a whole number of at least 1, got {text!r}")
    return value


def _add_example_arguments(command: argparse.ArgumentParser) -> None:
    """The op and its example signature: ``OP --shape NAME=AxB ... --scalar NAME=VALUE --dtype
    --target``, shared by ``cost`` and ``emit``."""
    command.add_argument("op", help="the op, e.g. rmsnorm")
    command.add_argument("--shape", action="append", default=[], metavar="NAME=AxB", help="a tensor's shape")
    command.add_argument(
        "--scalar", action="append", default=[], metavar="NAME=VALUE", help="a scalar argument"
    )
    command.add_argument("--dtype", default="bf16", help="dtype of every tensor (default: bf16)")
    command.add_argument("--target", default="trn2", choices=["trn1", "trn2", "trn3"])


def _with_parents(common: argparse.ArgumentParser) -> Any:
    """A parser class whose instances (the subcommands) take ``common``'s arguments too."""

    class Subcommand(argparse.ArgumentParser):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            kwargs["parents"] = [*kwargs.get("parents", ()), common]
            super().__init__(*args, **kwargs)

    return Subcommand


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``torch-nki`` and ``python -m torch_nki``; returns the exit code. ``-v``
    turns verbose mode on for the command and the processes it starts, and off again after it
    (a caller running several commands in one process keeps its own setting)."""
    from torch_nki import _quiet

    previous = os.environ.get(_quiet.VERBOSE_ENV)
    try:
        return _main(argv)
    finally:
        if previous is None:
            os.environ.pop(_quiet.VERBOSE_ENV, None)
        else:
            os.environ[_quiet.VERBOSE_ENV] = previous


def _main(argv: Sequence[str] | None) -> int:
    parser = argparse.ArgumentParser(
        prog="torch-nki", description="NKI kernels in Rust, as torch.ops.neuron.*"
    )
    parser.add_argument(
        "--load",
        action="append",
        default=[],
        metavar="PATH[=NAMESPACE]",
        help="load an out-of-tree kernel crate (its directory or built library) first; repeatable",
    )
    verbose_help = (
        "show what torch-nki captures: other libraries' log lines (the profiler's), and for "
        "conformance each file's output"
    )
    parser.add_argument("-v", "--verbose", dest="verbose_all", action="store_true", help=verbose_help)
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("-v", "--verbose", action="store_true", help=verbose_help)
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_with_parents(common))
    sub.add_parser("list", help="print the registered ops")
    fast = sub.add_parser(
        "fast", help="build the fast C++ kernels for the installed torch if needed; print the library's path"
    )
    fast.add_argument("--header", action="store_true", help="print the generated C ABI header instead")
    demo = sub.add_parser("demo", help="run every op eagerly and compiled, compare with ATen, time both")
    demo.add_argument("--no-compile", action="store_true", help="skip torch.compile(fullgraph=True)")
    demo.add_argument(
        "--repeat",
        type=_positive,
        default=15,
        help="timed calls per measurement (median of three alternating blocks)",
    )
    demo.add_argument(
        "--threads", type=_positive, metavar="N", help="torch's intra-op threads for the run (e.g. 1)"
    )
    cost = sub.add_parser("cost", help="estimate an op's device time with the cost model")
    _add_example_arguments(cost)
    cost.add_argument("--trace", metavar="PATH", help="write the Chrome/Perfetto trace JSON here")
    cost.add_argument(
        "--plot", metavar="PATH", help="write a PNG of the per-engine timeline and the roofline (matplotlib)"
    )
    emit = sub.add_parser("emit", help="print an op's NKI Python source for Trainium")
    _add_example_arguments(emit)
    emit.add_argument("-o", "--output", metavar="PATH", help="write the source here instead of printing it")
    table = sub.add_parser("table", help="the Markdown table of every op: contract, dtypes, backward, grade")
    table.add_argument("-o", "--output", metavar="PATH", help="write it here instead of printing it")
    coverage = sub.add_parser(
        "coverage", help="the Markdown table of the NKI 0.7 API the frontend implements"
    )
    coverage.add_argument("-o", "--output", metavar="PATH", help="write it here instead of printing it")
    cache = sub.add_parser("cache", help="the persistent NKI source cache: info, clear or path")
    cache.add_argument("action", choices=["info", "clear", "path"])
    swap = sub.add_parser(
        "swap", help="profile a transformers model, swap in neuron kernels, verify, report before/after"
    )
    swap.add_argument(
        "--model", default="llama-tiny", help="model preset (llama-tiny, llama-small, llama-512)"
    )
    swap.add_argument("--dtype", default="f32", choices=["f32", "bf16"])
    swap.add_argument("--report", metavar="PATH", help="write the Markdown report (and a PNG) here")
    swap.add_argument(
        "--busy", type=int, default=1, metavar="N", help="competing busy processes for the loaded ratios"
    )
    swap.add_argument(
        "--no-ratios", action="store_true", help="skip the whole-model ratios (swapped vs unswapped)"
    )
    bench = sub.add_parser("bench", help="grade every op at its bench shape: estimated device time vs CPU")
    bench.add_argument("--op", action="append", default=[], help="only this op (repeatable)")
    bench.add_argument("--target", default="trn2", choices=["trn1", "trn2", "trn3"])
    bench.add_argument("--repeat", type=_positive, default=3, help="timed calls per CPU measurement")
    bench.add_argument("--dtype", choices=["f32", "bf16", "f16"], help="instead of each op's bench dtype")
    bench.add_argument(
        "--models",
        action="store_true",
        help="instead: whole swapped Llama models vs unswapped (llama-tiny, llama-512), idle and busy",
    )
    bench.add_argument(
        "--busy", type=int, default=1, metavar="N", help="--models: competing busy processes (0: none)"
    )
    bench.add_argument(
        "--threads", type=_positive, metavar="N", help="--models, --by-op: torch's intra-op threads"
    )
    bench.add_argument(
        "--by-op",
        metavar="MODEL",
        help="instead: each op's time per step in MODEL (e.g. llama-512) unswapped and swapped",
    )
    bench.add_argument("--train", action="store_true", help="--by-op: a training step instead of a forward")
    conf = sub.add_parser(
        "conformance", help="run every @nki.jit kernel of a directory of NKI sources against its reference"
    )
    conf.add_argument("path", help="a .py file or a directory of them (e.g. aws-neuron-sdk's nki/examples)")
    conf.add_argument(
        "--target", default="trn2", choices=["trn1", "trn2", "trn3"], help="for kernels that do not pin one"
    )
    conf.add_argument("--markdown", action="store_true", help="print a Markdown table instead")
    conf.add_argument("--json", metavar="FILE", help="also write every record as JSON here")
    conf.add_argument(
        "--timeout",
        type=_seconds,
        metavar="SECONDS",
        help="run each file in a child Python, killed after this",
    )
    from torch_nki import calibrate as calibrate_mod

    calibrate_mod.add_arguments(
        sub.add_parser("calibrate", help="compare the cost model with device measurements (a JSON of cases)")
    )
    suite = sub.add_parser(
        "nkilib-suite",
        help="run aws-neuron/nki-library's own test suite (--test-mode simulation) on torch-nki",
    )
    suite.add_argument("path", help="a checkout of aws-neuron/nki-library")
    suite.add_argument("--platform", default="trn2", choices=["trn1", "trn2", "trn3"])
    suite.add_argument(
        "--tests",
        nargs="+",
        default=["test/integration"],
        help="the tests to run, relative to PATH: directories, files or test ids (several may be given)",
    )
    suite.add_argument("-k", dest="select", metavar="EXPR", help="only tests matching this pytest expression")
    suite.add_argument("--every", type=_positive, default=1, help="run every N-th collected test (a sample)")
    suite.add_argument("--jobs", type=_positive, default=1, help="pytest-xdist workers")
    suite.add_argument("--timeout", type=_seconds, default=600, help="seconds per test")
    suite.add_argument(
        "--memory",
        type=_gibibytes,
        default=8,
        metavar="GIB",
        help=(
            "address space each test process may map beyond what it maps at start "
            "(a test beyond it fails with MemoryError; 0: no limit)"
        ),
    )
    suite.add_argument("--log", metavar="FILE", help="write pytest's output here")
    suite.add_argument("-o", "--output", metavar="FILE", help="also write the Markdown report here")
    versus = sub.add_parser(
        "nkilib-versus",
        help="our kernels' estimates next to nki-library's counterparts (same cost model, shapes, dtypes)",
    )
    versus.add_argument("path", help="a checkout of aws-neuron/nki-library")
    versus.add_argument("--target", default="trn2", choices=["trn1", "trn2", "trn3"])
    versus.add_argument("-o", "--output", metavar="FILE", help="also write the Markdown table here")
    args = parser.parse_args(argv)
    if args.verbose_all or args.verbose:
        from torch_nki import _quiet

        _quiet.set_verbose(True)
    if args.command == "fast":
        from torch_nki import _fast

        print(_fast.header() if args.header else _fast.library_path() or _fast.build(verbose=args.verbose))
        return 0
    for entry in args.load:
        path, _, namespace = entry.partition("=")
        try:
            torch_nki.load(path, namespace or "neuron")
        except torch_nki.PluginError as err:
            print(f"error: {err}")
            return 2
    if args.command == "conformance":
        verbose = args.verbose_all or args.verbose
        return run_conformance(args.path, args.target, args.markdown, args.json, verbose, args.timeout)
    if args.command == "calibrate":
        return calibrate_mod.run(args)
    if args.command == "nkilib-suite":
        return run_nkilib_suite(args)
    if args.command == "nkilib-versus":
        return run_nkilib_versus(args)
    if args.command == "swap":
        from torch_nki import workflow

        return workflow.run(args.model, args.dtype, args.report, ratios=not args.no_ratios, n_busy=args.busy)
    if args.command == "bench" and args.by_op:
        from torch_nki import model_ops

        return model_ops.run(args.by_op, args.dtype or "f32", args.train, max(args.repeat, 12), args.threads)
    if args.command == "bench" and args.models:
        from torch_nki import model_bench

        return model_bench.run(max(args.busy, 0), args.threads, max(args.repeat, 9))
    if args.command == "bench":
        from torch_nki import bench as bench_mod
        from torch_nki._dtypes import NKI_TO_TORCH

        dtype = NKI_TO_TORCH[args.dtype] if args.dtype else None
        return bench_mod.run(args.op, args.target, args.repeat, dtype)
    if args.command == "cache":
        return run_cache(args.action)
    if args.command in ("table", "coverage"):
        if args.command == "table":
            from torch_nki import optable

            text = optable.markdown()
        else:
            from torch_nki.nki import coverage as coverage_mod

            text = coverage_mod.markdown()
        if args.output:
            try:
                Path(args.output).write_text(text, encoding="utf-8")
            except OSError as e:
                print(f"torch-nki {args.command}: cannot write {args.output}: {e.strerror or e}")
                return 2
        else:
            print(text, end="")
        return 0
    if args.command == "emit":
        return run_emit(args.op, args.shape, args.scalar, args.dtype, args.target, args.output)
    if args.command == "cost":
        return run_cost(args.op, args.shape, args.scalar, args.dtype, args.target, args.trace, args.plot)
    if args.command == "list":
        print_registry()
        return 0
    from torch_nki import demo as demo_mod

    print_registry()
    print()
    return demo_mod.run(compile=not args.no_compile, repeat=args.repeat, threads=args.threads)

#!/usr/bin/env python3
"""ATen reference fixtures for the accuracy tests of torch-nki (``tests/reference/README.md``).

The cases are every declared ``sample(...)`` of every kernel with a ``reference(...)``, in every
dtype the sample runs in, read from the registry (``torch_nki.testing``): this script names no op.
It builds their inputs with the portable PRNG that the Rust side (`tests/src/prng.rs`) implements
bit for bit, evaluates each kernel's reference expression with ATen on CPU and writes:

* ``fixtures/cases.json``: every case (name, op, dtype, inputs with shapes and seeds, scalar
  arguments, and per output its name, shape, dtype, the rows stored and the ``.bin`` file name);
* ``fixtures/<case>[.<output>].bin``: each output of the case, upcast to float32 (exact),
  little-endian, row-major, viewed as rows of its last dimension; only the listed rows when the
  output is large.

Inputs are not stored: both sides regenerate them from the seeds. A seed depends only on its
case's name and parameter name (:func:`input_seed`), so adding a kernel or a sample changes no
other case's files.

Portable PRNG: element ``i`` of an input with seed ``s`` is ``z = splitmix64(s + i)`` (wrapping
u64 arithmetic), whose top 24 bits ``z >> 40`` map to ``(z >> 40) / 2**23 - 1`` in [-1, 1)
(exact in float32), then rounded to nearest even into the case dtype.

Usage (from the repository root, with the project venv)::

    .venv/bin/python tests/reference/generate.py          # (re)write the fixtures
    .venv/bin/python tests/reference/generate.py --check  # regenerate to a temp dir, compare bytes

Every invocation first runs a self-check that pins the PRNG to exact values (the same literals
are asserted by the Rust unit tests). The output is deterministic: same torch build, same bytes.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import re
import sys
import tempfile
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import numpy.typing as npt
import torch
from torch_nki import testing
from torch_nki._manifest import OpSpec

FIXTURES = Path(__file__).resolve().parent / "fixtures"
"""Where the fixtures live (committed)."""

FORMAT_VERSION = 2
"""Version of the ``cases.json`` layout; bump when the Rust loader must change."""

MAX_FIXTURE_BYTES = 8_000_000
"""Budget for all fixture files together, in bytes: the generator refuses to write this much or more
(``tests/reference/README.md`` states it)."""

DTYPES: dict[str, torch.dtype] = {"f32": torch.float32, "bf16": torch.bfloat16, "f16": torch.float16}
"""Case dtypes by their nki-core name."""

SEED_STRIDE = 1 << 32
"""Seeds are multiples of this, so no two inputs share any part of their splitmix64 streams."""

_MASK64 = 0xFFFF_FFFF_FFFF_FFFF

# The first four values of seeds 0 and 12345, as exact float32 literals. `tests/src/prng.rs`
# asserts the same literals.
PINNED: dict[int, tuple[str, str, str, str]] = {
    0: ("0.7666216", "0.13312304", "0.18237936", "-0.7730994"),
    12345: ("-0.7338407", "0.5897893", "-0.3618058", "0.08120763"),
}


def splitmix64(z: npt.NDArray[np.uint64]) -> npt.NDArray[np.uint64]:
    """The splitmix64 finaliser of each element, in wrapping u64 arithmetic."""
    z = z + np.uint64(0x9E37_79B9_7F4A_7C15)
    z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58_476D_1CE4_E5B9)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D0_49BB_1331_11EB)
    return z ^ (z >> np.uint64(31))


def prng_f32(seed: int, n: int) -> npt.NDArray[np.float32]:
    """Elements ``0..n`` of the stream of ``seed`` as float32 in [-1, 1) (before dtype rounding)."""
    index = np.arange(n, dtype=np.uint64)
    z = splitmix64(np.uint64(seed & _MASK64) + index)
    top = (z >> np.uint64(40)).astype(np.float32)  # < 2**24: exact in float32
    return top / np.float32(1 << 23) - np.float32(1.0)  # exact: a multiple of 2**-23 in [-1, 1)


def prng_tensor(seed: int, shape: Sequence[int], dtype: torch.dtype) -> torch.Tensor:
    """A row-major tensor of ``shape`` filled from ``seed``, rounded (RNE) to ``dtype``."""
    n = int(np.prod(shape, dtype=np.int64))
    return torch.from_numpy(prng_f32(seed, n)).reshape(tuple(shape)).to(dtype)


def input_tensor(
    spec: OpSpec, name: str, v: Input, dtype: torch.dtype, domain: tuple[int, int, int | None] | None
) -> torch.Tensor:
    """A case input: PRNG values in ``dtype``.

    A tensor whose contract allows only i32 gets indices drawn from its declared domain instead
    (``testing.index_values``, which the Rust side mirrors).
    """
    if testing.fixed_dtype(spec, name) == "i32":
        u = torch.from_numpy(prng_f32(v.seed, int(np.prod(v.shape, dtype=np.int64)))).reshape(v.shape)
        return testing.index_values(u, domain)
    return prng_tensor(v.seed, v.shape, dtype)


def self_check() -> None:
    """Pins the PRNG and the dtype rounding; raises ``AssertionError`` on any deviation."""
    for seed, literals in PINNED.items():
        got = prng_f32(seed, 4)
        want = np.array([np.float32(s) for s in literals], dtype=np.float32)
        if got.tobytes() != want.tobytes():
            raise AssertionError(f"PRNG drifted for seed {seed}: got {got.tolist()}, want {list(literals)}")
    # Wrapping of seed + index past 2**64.
    wrapped = prng_f32(_MASK64, 2)
    if wrapped[1].tobytes() != prng_f32(0, 1)[0].tobytes():
        raise AssertionError("seed + index must wrap modulo 2**64")
    # Round to nearest, ties to even: 1 + 2**-8 is halfway between bf16 neighbours 1 and 1 + 2**-7.
    tie = torch.tensor([1.0 + 2.0**-8, 1.0 + 3 * 2.0**-8], dtype=torch.float32)
    if tie.to(torch.bfloat16).float().tolist() != [1.0, 1.0 + 2.0**-6]:
        raise AssertionError("torch bf16 conversion is not round-to-nearest-even")


@dataclass(frozen=True)
class Input:
    """One tensor argument of a case."""

    name: str
    shape: tuple[int, ...]
    seed: int


@dataclass(frozen=True)
class Case:
    """One accuracy case: a kernel's declared sample in one dtype."""

    name: str
    op: str
    dtype: str
    params: tuple[tuple[str, Input | float | int | bool | None], ...]
    """Every argument in parameter order: an :class:`Input` for tensors, the value for scalars."""

    @property
    def inputs(self) -> tuple[Input, ...]:
        """The tensor arguments, in parameter order."""
        return tuple(v for _, v in self.params if isinstance(v, Input))


#: Output elements stored in full; larger outputs store a row sample (every k-th row of the
#: output viewed as rows of its last dimension, plus the rows around each 128-row tile edge).
FULL_OUTPUT_LIMIT = 16_384


def sample_rows(n: int, step: int, tile: int = 128) -> tuple[int, ...]:
    """Every ``step``-th row, plus the rows on both sides of every ``tile`` boundary and the last two."""
    rows = set(range(0, n, step))
    for edge in range(tile, n, tile):
        rows.update((edge - 2, edge - 1, edge, edge + 1))
    rows.update((n - 2, n - 1))
    return tuple(sorted(r for r in rows if 0 <= r < n))


def stored_rows(shape: Sequence[int]) -> tuple[int, ...] | None:
    """The rows of an output to store, or ``None`` to store all of it."""
    numel = int(np.prod(shape, dtype=np.int64))
    if numel <= FULL_OUTPUT_LIMIT or len(shape) == 0:
        return None
    row_len = max(int(shape[-1]), 1)
    n = numel // row_len
    step = max(1, -(-numel // FULL_OUTPUT_LIMIT))
    return sample_rows(n, step)


def dims(shape: Sequence[int]) -> str:
    """``[3, 50, 70]`` → ``3x50x70``; ``[]`` → ``scalar``."""
    return "x".join(str(d) for d in shape) or "scalar"


def input_seed(case: str, param: str) -> int:
    """The seed of input ``param`` of case ``case``, from the two names alone.

    The first four bytes of the SHA-256 of ``"<case>/<param>"`` (little-endian) times
    ``SEED_STRIDE``: a function of the case's own name (op, shapes, dtype) and nothing else, so
    adding, removing or reordering other ops or samples reseeds no existing case.
    """
    digest = hashlib.sha256(f"{case}/{param}".encode()).digest()
    return int.from_bytes(digest[:4], "little") * SEED_STRIDE


def build_cases(ops: Sequence[str] | None = None) -> list[Case]:
    """Every declared sample of every kernel in ``ops``, in every dtype it runs in.

    ``ops`` defaults to every kernel with a reference, in registry order. The cases are in the
    order of ``ops`` (the order of ``cases.json``); nothing here names an op. Each input's seed
    comes from its case's name (:func:`input_seed`).
    """
    cases: list[Case] = []
    for op in testing.ops_with_reference() if ops is None else ops:
        spec = testing.op_spec(op)
        for sample in spec.samples:
            shapes = [sample.args[p.name] for p in spec.params if p.is_tensor]
            texts = ("none" if s is None else dims(s) for s in shapes)
            stem = f"{op}_{'_'.join(texts)}"
            for dt in sample.dtypes:
                name = f"{stem}_{dt}"
                params: list[tuple[str, Input | float | int | bool | None]] = []
                for p in spec.params:
                    if p.is_tensor:
                        shape = sample.args[p.name]
                        value = None if shape is None else Input(p.name, tuple(shape), input_seed(name, p.name))
                        params.append((p.name, value))
                    else:
                        params.append((p.name, sample.args.get(p.name, p.default)))
                cases.append(Case(name=name, op=op, dtype=dt, params=tuple(params)))
    names = [c.name for c in cases]
    dupes = sorted({n for n in names if names.count(n) > 1})
    assert not dupes, f"case names must be unique (two samples with the same shapes?): {dupes}"
    seeds = Counter(i.seed for c in cases for i in c.inputs)
    clashes = sorted(f"{c.name}.{i.name}" for c in cases for i in c.inputs if seeds[i.seed] > 1)
    assert not clashes, f"two inputs hash to the same seed (rename a sample's shapes): {clashes}"
    return cases


def run_case(case: Case) -> tuple[dict[str, object], dict[str, bytes]]:
    """Computes one case: its ``cases.json`` entry and its ``.bin`` files (one per output)."""
    dtype = DTYPES[case.dtype]
    spec = testing.op_spec(case.op)
    tensor_shapes = [
        v.shape if isinstance(v, Input) else None
        for p, (_, v) in zip(spec.params, case.params, strict=True)
        if p.is_tensor
    ]
    scalars = [v for p, (_, v) in zip(spec.params, case.params, strict=True) if not p.is_tensor]
    domains = dict(
        zip(testing.tensor_params(spec), testing.index_domains(spec, tensor_shapes, dtype, scalars), strict=True)
    )
    args = [
        input_tensor(spec, name, v, dtype, domains.get(name)) if isinstance(v, Input) else v for name, v in case.params
    ]
    sample = testing.SampleInput(case.op, dtype, tuple(args), 0)
    with torch.no_grad():
        outs = testing.reference(sample)
    public = spec.public_outputs
    if len(outs) != len(public):
        raise AssertionError(f"{case.name}: reference returned {len(outs)} outputs, the op returns {len(public)}")
    files: dict[str, bytes] = {}
    outputs: list[dict[str, object]] = []
    for spec_out, out in zip(public, outs, strict=True):
        rows = stored_rows(out.shape)
        flat = out.reshape(-1, out.shape[-1]) if out.dim() > 0 else out.reshape(1, 1)
        stored = flat if rows is None else flat[list(rows)]
        file = f"{case.name}.bin" if len(public) == 1 else f"{case.name}.{spec_out.name}.bin"
        files[file] = stored.to(torch.float32).contiguous().numpy().astype("<f4").tobytes()
        outputs.append(
            {
                "name": spec_out.name,
                "shape": list(out.shape),
                "dtype": next(k for k, v in DTYPES.items() if v == out.dtype),
                "rows": None if rows is None else list(rows),
                "file": file,
            }
        )
    entry: dict[str, object] = {
        "name": case.name,
        "op": case.op,
        "dtype": case.dtype,
        "inputs": [{"name": i.name, "shape": list(i.shape), "seed": i.seed} for i in case.inputs],
        "scalars": [
            {"name": p.name, "value": v} for p, (_, v) in zip(spec.params, case.params, strict=True) if not p.is_tensor
        ],
        "outputs": outputs,
    }
    return entry, files


def compact_lists(text: str) -> str:
    """Puts every JSON list without nested lists or objects (shapes, rows) on one line."""
    return re.sub(r"\[([^\[\]{}]*)\]", lambda m: "[" + " ".join(m.group(1).split()) + "]", text)


def compute(ops: Sequence[str] | None = None) -> dict[str, bytes]:
    """Every fixture file of the cases of ``ops``: file name → contents.

    ``ops`` defaults to every kernel with a reference. Raises ``AssertionError`` over the size
    budget.
    """
    torch.manual_seed(0)
    torch.set_num_threads(1)
    torch.use_deterministic_algorithms(True)
    files: dict[str, bytes] = {}
    entries: list[dict[str, object]] = []
    for case in build_cases(ops):
        entry, data = run_case(case)
        entries.append(entry)
        files.update(data)
    doc = {
        "format": FORMAT_VERSION,
        "generator": "tests/reference/generate.py",
        "torch": torch.__version__,
        "prng": "splitmix64(seed + i) >> 40, / 2^23 - 1, then RNE to dtype",
        "cases": entries,
    }
    files["cases.json"] = (compact_lists(json.dumps(doc, indent=2)) + "\n").encode()
    total = sum(len(b) for b in files.values())
    if total >= MAX_FIXTURE_BYTES:
        raise AssertionError(f"fixtures total {total} bytes, over the {MAX_FIXTURE_BYTES} budget")
    return files


def generate(out_dir: Path) -> dict[str, bytes]:
    """Computes every fixture file (:func:`compute`) and writes it to ``out_dir``."""
    files = compute()
    out_dir.mkdir(parents=True, exist_ok=True)
    for name, data in files.items():
        (out_dir / name).write_bytes(data)
    return files


def stale_files(out_dir: Path, files: dict[str, bytes]) -> list[Path]:
    """Files in ``out_dir`` that the generator does not produce."""
    return sorted(p for p in out_dir.iterdir() if p.is_file() and p.name not in files)


REORDERING_EPS = 16
"""How many float32 epsilons, times the output's largest magnitude, two valid ATen summation
orders may differ by (AVX2 against AVX-512 machines: up to 6 for the f32 matmul and attention
fixtures)."""


def within_reordering(name: str, stored: bytes, fresh: bytes) -> bool:
    """Whether two ``.bin`` outputs differ only as two summation orders of the same sums can.

    ATen picks CPU kernels (and so summation orders) by the processor it runs on, so a reference
    regenerated on another machine may differ by one unit in the last place of an element or,
    where a sum cancels, by a few float32 epsilons of the output's largest magnitude
    (``REORDERING_EPS``; for 16-bit outputs, one epsilon of their dtype). A changed sample,
    seed or reference expression changes far more.
    """
    if not name.endswith(".bin") or len(stored) != len(fresh):
        return False
    suffix = name.removesuffix(".bin").split(".")[0].rsplit("_", 1)[1]
    dtype = {"f32": torch.float32, "bf16": torch.bfloat16, "f16": torch.float16}[suffix]
    a = torch.frombuffer(bytearray(stored), dtype=torch.float32).to(torch.float64)
    b = torch.frombuffer(bytearray(fresh), dtype=torch.float32).to(torch.float64)
    if a.numel() == 0:
        return True
    eps = torch.finfo(dtype).eps
    largest = max(a.abs().max().item(), b.abs().max().item())
    ulp = eps * torch.maximum(a.abs(), b.abs()).clamp_min(torch.finfo(dtype).tiny)
    scale = max(REORDERING_EPS * torch.finfo(torch.float32).eps, eps) * largest
    return bool(((a - b).abs() <= ulp.clamp_min(scale)).all())


def check(out_dir: Path) -> int:
    """Regenerates into a temp dir and compares bytes with ``out_dir``; returns the exit code."""
    with tempfile.TemporaryDirectory() as tmp:
        files = generate(Path(tmp))
    problems: list[str] = []
    for name, data in sorted(files.items()):
        path = out_dir / name
        if not path.is_file():
            problems.append(f"missing: {path}")
        elif path.read_bytes() != data and not within_reordering(name, path.read_bytes(), data):
            problems.append(f"differs: {path}")
    if out_dir.is_dir():
        problems.extend(f"stale: {p}" for p in stale_files(out_dir, files))
    for p in problems:
        print(p, file=sys.stderr)
    if problems:
        print(f"{len(problems)} fixture problem(s); rerun {Path(__file__).name} to regenerate", file=sys.stderr)
        return 1
    print(f"fixtures up to date: {len(files)} files, {sum(len(b) for b in files.values())} bytes")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """Command-line entry point."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--check", action="store_true", help="regenerate to a temp dir and compare bytes")
    parser.add_argument("--out", type=Path, default=FIXTURES, help="fixture directory (default: %(default)s)")
    args = parser.parse_args(argv)
    self_check()
    if args.check:
        return check(args.out)
    files = generate(args.out)
    for p in stale_files(args.out, files):
        p.unlink()
        print(f"removed stale {p}")
    print(f"wrote {len(files)} files, {sum(len(b) for b in files.values())} bytes to {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Side by side with the official kernel library: each torch-nki op that has a counterpart in a
user's checkout of aws-neuron/nki-library, both estimated by the same cost model at the same
shapes and dtypes (``torch-nki nkilib-versus PATH``, docs/nki-library.md).

nki-library's kernels are traced unmodified through :mod:`torch_nki.nki` (its ``nki`` imports
resolve to the shims of :mod:`torch_nki.nkilib_suite`), launched as NKI launches them on the
target (``kernel[2]`` on a Trn2 logical NeuronCore); ours are estimated with
:func:`torch_nki.cost`, on the cores the registry launches them on. The counterparts are declared
once, in :data:`COUNTERPARTS`: which kernel, the shapes (taken from the model sizes nki-library's
own tests use), and how each side's arguments are laid out for one problem. Where the two
contracts differ (layouts, extra outputs), the counterpart says so. nki-library's kernels for
which torch-nki has no op, or which do not import at the checkout's commit, are listed in
:data:`UNPAIRED` with the reason."""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from torch_nki.nkilib_suite import SHIMS

__all__ = ["COUNTERPARTS", "UNPAIRED", "Counterpart", "Row", "compare", "markdown"]

Arrays = dict[str, Any]
"""A kernel's keyword arguments: NumPy arrays and Python values."""


@dataclass(frozen=True)
class Problem:
    """One problem both sides solve: its sizes (named as the counterpart's docs name them) and
    the element dtype (a NumPy-compatible name: ``float32``, ``bfloat16``, ``float16``)."""

    sizes: dict[str, int]
    dtype: str

    def label(self) -> str:
        """``B=1 S=2048 ... bfloat16``."""
        return " ".join(f"{k}={v}" for k, v in self.sizes.items()) + f" {self.dtype}"


@dataclass(frozen=True)
class Counterpart:
    """A torch-nki op and the nki-library kernel that does the same work."""

    op: str
    """The ``torch.ops.neuron`` op."""
    kernel: str
    """``module:function`` under nki-library's ``src`` (``nkilib_src.nkilib...``)."""
    problems: tuple[Problem, ...]
    theirs: Callable[[Problem], Arrays]
    """nki-library's kernel arguments for a problem."""
    ours: Callable[[Problem], tuple[tuple[Any, ...], dict[str, Any]]]
    """Our op's arguments (torch tensors) and keyword arguments for the same problem."""
    differences: str
    """What the two contracts do differently (layouts, outputs), so a reader weighs the
    comparison."""
    jit: bool = False
    """Whether the kernel is a plain function nki-library's tests launch through their
    framework's ``nki.jit`` (its subkernels), rather than an ``@nki.jit`` kernel."""


@dataclass(frozen=True)
class Row:
    """One problem's estimates, µs (``None`` with the reason when a side did not trace)."""

    op: str
    kernel: str
    problem: Problem
    ours_us: float | None
    theirs_us: float | None
    ours_cores: int = 1
    theirs_cores: int = 1
    ours_bound: str = ""
    theirs_bound: str = ""
    error: str = ""
    differences: str = field(default="", repr=False)

    @property
    def ratio(self) -> float | None:
        """Ours over theirs (below 1: ours is estimated faster)."""
        if self.ours_us is None or not self.theirs_us:
            return None
        return self.ours_us / self.theirs_us


def _rng(problem: Problem) -> np.random.Generator:
    return np.random.default_rng(sum(problem.sizes.values()))


def _np_dtype(name: str) -> Any:
    if name == "bfloat16":
        import ml_dtypes

        return ml_dtypes.bfloat16
    return np.dtype(name)


def _array(problem: Problem, shape: Sequence[int], dtype: str | None = None) -> np.ndarray:
    values = _rng(problem).standard_normal(tuple(shape), dtype=np.float32)
    return values.astype(_np_dtype(dtype or problem.dtype))


def _zeros(problem: Problem, shape: Sequence[int], dtype: str | None = None) -> np.ndarray:
    return np.zeros(tuple(shape), dtype=_np_dtype(dtype or problem.dtype))


def _tensor(problem: Problem, shape: Sequence[int], dtype: str | None = None) -> Any:
    import torch

    name = dtype or problem.dtype
    values = torch.from_numpy(_rng(problem).standard_normal(tuple(shape), dtype=np.float32))
    return values.to(getattr(torch, name))


def _norm_theirs(beta: bool) -> Callable[[Problem], Arrays]:
    def build(p: Problem) -> Arrays:
        b, s, h = p.sizes["B"], p.sizes["S"], p.sizes["H"]
        args = {
            "input": _array(p, (b, s, h)),
            "gamma": _array(p, (1, h)),
            "output": _zeros(p, (128, b * s, h // 128)),
        }
        if beta:
            args["beta"] = _array(p, (1, h))
        return args

    return build


def _rmsnorm_ours(p: Problem) -> tuple[tuple[Any, ...], dict[str, Any]]:
    b, s, h = p.sizes["B"], p.sizes["S"], p.sizes["H"]
    return (_tensor(p, (b * s, h)), _tensor(p, (h,))), {}


def _layernorm_ours(p: Problem) -> tuple[tuple[Any, ...], dict[str, Any]]:
    b, s, h = p.sizes["B"], p.sizes["S"], p.sizes["H"]
    return (_tensor(p, (b * s, h)), _tensor(p, (h,)), _tensor(p, (h,))), {}


def _rope_theirs(p: Problem) -> Arrays:
    b, h, hkv, s, d = (p.sizes[k] for k in ("B", "H", "Hkv", "S", "D"))
    return {
        "q": _array(p, (b, h, s, d)),
        "k": _array(p, (b, hkv, s, d)),
        "q_out": _zeros(p, (b, h, s, d)),
        "k_out": _zeros(p, (b, hkv, s, d)),
        "cos": _array(p, (s, d)),
        "sin": _array(p, (s, d)),
    }


def _rope_ours(p: Problem) -> tuple[tuple[Any, ...], dict[str, Any]]:
    b, h, hkv, s, d = (p.sizes[k] for k in ("B", "H", "Hkv", "S", "D"))
    shapes = ((b, h, s, d), (b, hkv, s, d), (s, d), (s, d))
    return tuple(_tensor(p, shape) for shape in shapes), {}


def _attention_theirs(p: Problem) -> Arrays:
    b, h, hkv, s, d = (p.sizes[k] for k in ("B", "H", "Hkv", "S", "D"))
    return {
        "q": _array(p, (b * h, s, d)),
        "k": _array(p, (b * hkv, d, s)),
        "v": _array(p, (b * hkv, s, d)),
        "causal_mask": True,
    }


def _attention_ours(p: Problem) -> tuple[tuple[Any, ...], dict[str, Any]]:
    b, h, hkv, s, d = (p.sizes[k] for k in ("B", "H", "Hkv", "S", "D"))
    q, k, v = (_tensor(p, (b, n, s, d)) for n in (h, hkv, hkv))
    return (q, k, v), {"causal": True}


def _attention_bwd_theirs(p: Problem) -> Arrays:
    b, h, hkv, s, d = (p.sizes[k] for k in ("B", "H", "Hkv", "S", "D"))
    return {
        "q_ref": _array(p, (b, h, d, s)),
        "k_ref": _array(p, (b, hkv, d, s)),
        "v_ref": _array(p, (b, hkv, d, s)),
        "o_ref": _array(p, (b, h, d, s)),
        "dy_ref": _array(p, (b, h, d, s)),
        "lse_ref": _array(p, (b, h, 128, s // 128), "float32"),
        "use_causal_mask": True,
    }


def _attention_bwd_ours(p: Problem) -> tuple[tuple[Any, ...], dict[str, Any]]:
    b, h, hkv, s, d = (p.sizes[k] for k in ("B", "H", "Hkv", "S", "D"))
    grad_out, q, out = (_tensor(p, (b, h, s, d)) for _ in range(3))
    k, v = (_tensor(p, (b, hkv, s, d)) for _ in range(2))
    grad_lse = _tensor(p, (b, h, s), "float32") * 0
    lse = _tensor(p, (b, h, s), "float32")
    return (grad_out, grad_lse, q, k, v, out, lse), {"causal": True}


def _cross_entropy_sizes(p: Problem) -> tuple[int, int, int]:
    n, v = p.sizes["N"], p.sizes["V"]
    return n, v, min(v, 32768)


def _targets(p: Problem) -> np.ndarray:
    n, v, _ = _cross_entropy_sizes(p)
    return _rng(p).integers(0, v, n).astype(np.int32)


def _cross_entropy_theirs(p: Problem) -> Arrays:
    n, v, chunk = _cross_entropy_sizes(p)
    return {
        "logits_hbm": _array(p, (n, v)),
        "targets_hbm": _targets(p),
        "chunk_size": chunk,
        "dtype": _np_dtype(p.dtype),
    }


def _cross_entropy_ours(p: Problem) -> tuple[tuple[Any, ...], dict[str, Any]]:
    import torch

    n, v, _ = _cross_entropy_sizes(p)
    return (_tensor(p, (n, v)), torch.from_numpy(_targets(p))), {"reduction": "none"}


def _cross_entropy_bwd_theirs(p: Problem) -> Arrays:
    n, v, chunk = _cross_entropy_sizes(p)
    return {
        "logits_hbm": _array(p, (n, v)),
        "targets_hbm": _targets(p),
        "lse_state_hbm": _array(p, (n,)),
        "chunk_size": chunk,
        "dtype": _np_dtype(p.dtype),
    }


def _cross_entropy_bwd_ours(p: Problem) -> tuple[tuple[Any, ...], dict[str, Any]]:
    import torch

    n, v, _ = _cross_entropy_sizes(p)
    grad = _tensor(p, (), "float32")
    logits = _tensor(p, (n, v))
    lse = _tensor(p, (n,), "float32")
    count = torch.tensor(float(n))
    return (grad.to(logits.dtype), logits, torch.from_numpy(_targets(p)), lse, count), {}


_NORM_PROBLEMS = (
    Problem({"B": 1, "S": 8, "H": 8192}, "float16"),
    Problem({"B": 128, "S": 5, "H": 3072}, "float16"),
)
_ATTENTION_PROBLEMS = (Problem({"B": 1, "H": 8, "Hkv": 8, "S": 2048, "D": 128}, "bfloat16"),)
_CROSS_ENTROPY_PROBLEMS = (Problem({"N": 256, "V": 32000}, "bfloat16"),)

_NORM_DIFFERENCES = (
    "theirs is the token-generation subkernel: it writes y transposed for the next matmul "
    "([128, B·S, H/128] in SBUF layout, here an HBM array); ours writes y as x's shape and also "
    "saves rstd for the backward"
)

COUNTERPARTS: tuple[Counterpart, ...] = (
    Counterpart(
        "rmsnorm",
        "nkilib_src.nkilib.core.subkernels.rmsnorm_tkg:rmsnorm_tkg",
        _NORM_PROBLEMS,
        _norm_theirs(beta=False),
        _rmsnorm_ours,
        _NORM_DIFFERENCES,
        jit=True,
    ),
    Counterpart(
        "layernorm",
        "nkilib_src.nkilib.core.subkernels.layernorm_tkg:layernorm_tkg",
        _NORM_PROBLEMS,
        _norm_theirs(beta=True),
        _layernorm_ours,
        _NORM_DIFFERENCES.replace("rstd", "mean and rstd"),
        jit=True,
    ),
    Counterpart(
        "rope",
        "nkilib_src.nkilib.core.embeddings.rope_hf:rope_hf",
        (
            Problem({"B": 1, "H": 32, "Hkv": 8, "S": 2048, "D": 128}, "bfloat16"),
            Problem({"B": 2, "H": 8, "Hkv": 2, "S": 512, "D": 64}, "float32"),
        ),
        _rope_theirs,
        _rope_ours,
        "the same layout ([B, heads, S, D] in, cos/sin [S, D]); theirs writes into output arrays "
        "it is given, ours allocates them",
    ),
    Counterpart(
        "flash_attention",
        "nkilib_src.nkilib.core.attention.attention_cte:attention_cte",
        _ATTENTION_PROBLEMS,
        _attention_theirs,
        _attention_ours,
        "causal on both; theirs takes the heads folded into the batch and K transposed ([B·Hkv, D, S]); "
        "ours takes [B, heads, S, D] and also writes the log-sum-exp (fp32, B·H·S) for the backward",
    ),
    Counterpart(
        "flash_attention_backward",
        "nkilib_src.nkilib.core.attention.attention_bwd:attention_bwd",
        (Problem({"B": 1, "H": 4, "Hkv": 4, "S": 1024, "D": 128}, "bfloat16"),),
        _attention_bwd_theirs,
        _attention_bwd_ours,
        "causal on both; theirs takes every tensor transposed ([B, heads, D, S]) and the "
        "log-sum-exp tiled [B, H, 128, S/128]; ours takes [B, heads, S, D] and a gradient for the "
        "log-sum-exp output as well",
    ),
    Counterpart(
        "cross_entropy",
        "nkilib_src.nkilib.experimental.loss.cross_entropy:cross_entropy_forward",
        _CROSS_ENTROPY_PROBLEMS,
        _cross_entropy_theirs,
        _cross_entropy_ours,
        "per-position losses on both (ours with reduction='none'); theirs returns the loss and the "
        "log-sum-exp in the logits' dtype, ours the log-sum-exp in fp32 and honours ignore_index",
    ),
    Counterpart(
        "cross_entropy_backward",
        "nkilib_src.nkilib.experimental.loss.cross_entropy:cross_entropy_backward",
        _CROSS_ENTROPY_PROBLEMS,
        _cross_entropy_bwd_theirs,
        _cross_entropy_bwd_ours,
        "mean reduction on both; theirs overwrites the logits with their gradient (inplace=True, its "
        "default), ours writes a new tensor",
    ),
)
"""Every torch-nki op with an nki-library counterpart, and the problems they are compared at."""

UNPAIRED: tuple[tuple[str, str], ...] = (
    (
        "MLP (`silu_mul`, `gelu_mul`, `linear`)",
        "nki-library's `core/mlp/mlp.py` does not parse at d2ad3a5 (an `IndentationError`), so its "
        "fused MLP kernels cannot be imported by any simulator",
    ),
    ("top-k / router (`router_topk`, `topk`)", "torch-nki has no top-k or router op"),
    ("cumsum", "torch-nki has no cumulative-sum op"),
)
"""nki-library kernels the issue names that have no comparison, each with the reason."""


@contextmanager
def _library_on_path(checkout: Path) -> Iterator[None]:
    """nki-library's ``src`` and the ``nki`` shims importable for the duration."""
    paths = [str(SHIMS), str(checkout / "src"), str(checkout)]
    saved = list(sys.path)
    sys.path[:0] = paths
    try:
        yield
    finally:
        sys.path[:] = saved


def _load(counterpart: Counterpart) -> Any:
    from torch_nki import nki

    module, _, name = counterpart.kernel.partition(":")
    kernel = getattr(importlib.import_module(module), name)
    return nki.jit(kernel) if counterpart.jit else kernel


def _theirs(counterpart: Counterpart, problem: Problem, target: str) -> Any:
    from torch_nki import _cost

    kernel = _load(counterpart)
    cores = 2 if target in ("trn2", "trn3") else 1
    launch = kernel[cores] if cores > 1 else kernel
    program = launch.trace(target=target, **counterpart.theirs(problem))
    return _cost.report(counterpart.kernel, *program.cost())


def _ours(counterpart: Counterpart, problem: Problem, target: str) -> Any:
    import torch_nki

    args, kwargs = counterpart.ours(problem)
    return torch_nki.cost(counterpart.op, *args, target=target, **kwargs)


def _first_line(e: BaseException) -> str:
    text = str(e).strip().splitlines()
    return f"{type(e).__name__}: {text[0] if text else ''}"[:200]


def compare(
    checkout: Path, *, target: str = "trn2", counterparts: Sequence[Counterpart] = COUNTERPARTS
) -> list[Row]:
    """Estimates every counterpart's problems on both sides (see the module doc). A side that
    does not trace or estimate leaves its figure ``None`` and the error on the row."""
    if not (checkout / "src").is_dir():
        raise FileNotFoundError(f"{checkout} is not an nki-library checkout (no src/)")
    rows = []
    with _library_on_path(checkout):
        for c in counterparts:
            for problem in c.problems:
                errors = []
                try:
                    ours = _ours(c, problem, target)
                except Exception as e:  # reported on the row
                    ours = None
                    errors.append(f"ours: {_first_line(e)}")
                try:
                    theirs = _theirs(c, problem, target)
                except Exception as e:  # reported on the row
                    theirs = None
                    errors.append(f"theirs: {_first_line(e)}")
                rows.append(
                    Row(
                        op=c.op,
                        kernel=c.kernel.partition(":")[2],
                        problem=problem,
                        ours_us=None if ours is None else ours.total_ns / 1e3,
                        theirs_us=None if theirs is None else theirs.total_ns / 1e3,
                        ours_cores=1 if ours is None else ours.cores,
                        theirs_cores=1 if theirs is None else theirs.cores,
                        ours_bound="" if ours is None else ours.bound,
                        theirs_bound="" if theirs is None else theirs.bound,
                        error="; ".join(errors),
                        differences=c.differences,
                    )
                )
    return rows


def _us(value: float | None, cores: int, bound: str) -> str:
    if value is None:
        return "—"
    return f"{value:,.1f} µs ({cores} core{'s' if cores > 1 else ''}, {bound})"


def markdown(rows: Sequence[Row], target: str = "trn2") -> str:
    """The side-by-side table, then each op's contract differences and the unpaired kernels."""
    lines = [
        f"| op | nki-library kernel | problem | ours ({target}) | nki-library ({target}) | ours / theirs |",
        "|---|---|---|---:|---:|---:|",
    ]
    for r in rows:
        ratio = "—" if r.ratio is None else f"{r.ratio:.2f}"
        ours = _us(r.ours_us, r.ours_cores, r.ours_bound)
        theirs = _us(r.theirs_us, r.theirs_cores, r.theirs_bound)
        lines.append(f"| `{r.op}` | `{r.kernel}` | {r.problem.label()} | {ours} | {theirs} | {ratio} |")
    lines.append("")
    seen = set()
    for r in rows:
        if r.op not in seen:
            seen.add(r.op)
            lines.append(f"- `{r.op}` vs `{r.kernel}`: {r.differences}.")
        if r.error:
            lines.append(f"  - {r.problem.label()}: {r.error}")
    for what, why in UNPAIRED:
        lines.append(f"- {what}: not compared; {why}.")
    return "\n".join(lines) + "\n"

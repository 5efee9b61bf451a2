"""``torch-nki nkilib-versus``: our ops' estimates next to nki-library's counterparts, from the same
cost model. CI has no nki-library checkout, so the machinery is tested on a stand-in library
written here (an NKI RMSNorm of our own, under a module name of its own); ``TORCH_NKI_NKILIB``
names a real checkout for the last test."""

from __future__ import annotations

import os
import textwrap
from pathlib import Path

import pytest

from torch_nki import cli
from torch_nki.nkilib_suite import versus

pytest.importorskip("ml_dtypes")

_KERNELS = """
import nki
import nki.isa as nisa
import nki.language as nl


@nki.jit
def row_rmsnorm(x, gamma, eps=1e-6):
    n, h = x.shape
    out = nl.ndarray((n, h), dtype=x.dtype, buffer=nl.shared_hbm)
    xt = nl.ndarray((n, h), dtype=x.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=xt, src=x)
    sq = nl.ndarray((n, h), dtype=nl.float32, buffer=nl.sbuf)
    ss = nl.ndarray((n, 1), dtype=nl.float32, buffer=nl.sbuf)
    nisa.activation_reduce(dst=sq, op=nl.square, data=xt, reduce_op=nl.add, reduce_res=ss)
    r = nl.ndarray((n, 1), dtype=nl.float32, buffer=nl.sbuf)
    nisa.tensor_scalar(dst=r, data=ss, op0=nl.multiply, operand0=1.0 / h, op1=nl.add, operand1=eps)
    nisa.activation(dst=r, op=nl.rsqrt, data=r)
    g = nl.ndarray((n, h), dtype=x.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=g, src=gamma.ap([[0, n], [1, h]], 0))
    y = nl.ndarray((n, h), dtype=x.dtype, buffer=nl.sbuf)
    nisa.scalar_tensor_tensor(dst=y, data=xt, op0=nl.multiply, operand0=r, op1=nl.multiply, operand1=g)
    nisa.dma_copy(dst=out, src=y)
    return out


def broken(x, gamma):
    raise ValueError("this kernel does not trace")
"""


def _problem_args(p: versus.Problem) -> versus.Arrays:
    n, h = p.sizes["N"], p.sizes["H"]
    return {"x": versus._array(p, (n, h)), "gamma": versus._array(p, (1, h))}


def _ours(p: versus.Problem) -> tuple[tuple[object, ...], dict[str, object]]:
    n, h = p.sizes["N"], p.sizes["H"]
    return (versus._tensor(p, (n, h)), versus._tensor(p, (h,))), {}


def _library(root: Path) -> Path:
    (root / "src").mkdir(parents=True)
    (root / "src" / "torch_nki_versus_stand_in.py").write_text(textwrap.dedent(_KERNELS))
    return root


def _counterparts() -> tuple[versus.Counterpart, ...]:
    problem = versus.Problem({"N": 128, "H": 512}, "float32")
    return (
        versus.Counterpart(
            "rmsnorm",
            "torch_nki_versus_stand_in:row_rmsnorm",
            (problem,),
            _problem_args,
            _ours,
            "a stand-in",
        ),
        versus.Counterpart(
            "rmsnorm",
            "torch_nki_versus_stand_in:broken",
            (problem,),
            _problem_args,
            _ours,
            "broken",
            jit=True,
        ),
    )


def test_both_sides_are_estimated_by_the_same_model(tmp_path: Path) -> None:
    rows = versus.compare(_library(tmp_path / "lib"), counterparts=_counterparts())
    good, bad = rows
    assert good.ours_us is not None and good.theirs_us is not None
    assert good.ours_us > 0 and good.theirs_us > 0 and good.error == ""
    assert good.ratio == pytest.approx(good.ours_us / good.theirs_us)
    # Ours splits its rows over both cores of a Trn2 logical NeuronCore; the stand-in ignores
    # its program id, so both cores do all of it (one core's work is the estimate).
    assert good.ours_cores == 2 and good.theirs_cores == 2
    # A side that does not trace leaves its figure empty and says why; the other side stands.
    assert bad.theirs_us is None and bad.ours_us == good.ours_us
    assert bad.error == "theirs: ValueError: this kernel does not trace"
    text = versus.markdown(rows)
    assert "| `rmsnorm` | `row_rmsnorm` | N=128 H=512 float32 |" in text
    assert f"| {good.ratio:.2f} |" in text
    assert "  - N=128 H=512 float32: theirs: ValueError: this kernel does not trace" in text
    for what, _ in versus.UNPAIRED:
        assert f"- {what}: not compared" in text
    # On Trn1 both run on one core.
    (trn1,) = versus.compare(tmp_path / "lib", target="trn1", counterparts=_counterparts()[:1])
    assert trn1.ours_cores == 1 and trn1.theirs_cores == 1


def test_our_side_of_every_counterpart_is_estimated() -> None:
    import torch_nki

    for c in versus.COUNTERPARTS:
        assert c.problems and c.differences, c.op
        for p in c.problems:
            args, kwargs = c.ours(p)
            assert torch_nki.cost(c.op, *args, **kwargs).total_ns > 0, (c.op, p.label())


def test_not_a_checkout_is_a_clear_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(FileNotFoundError, match="is not an nki-library checkout"):
        versus.compare(tmp_path)
    assert cli.main(["nkilib-versus", str(tmp_path)]) == 2
    assert "is not an nki-library checkout (no src/)" in capsys.readouterr().out


def test_against_a_real_checkout(tmp_path: Path) -> None:
    checkout = os.environ.get("TORCH_NKI_NKILIB")
    if not checkout:
        pytest.skip("set TORCH_NKI_NKILIB to a checkout of aws-neuron/nki-library to compare with it")
    out = tmp_path / "versus.md"
    assert cli.main(["nkilib-versus", checkout, "-o", str(out)]) == 0
    rows = out.read_text().splitlines()
    table = [r for r in rows if r.startswith("| `")]
    assert len(table) == sum(len(c.problems) for c in versus.COUNTERPARTS)
    assert all("—" not in r for r in table), "\n".join(r for r in rows if r.startswith("  - "))

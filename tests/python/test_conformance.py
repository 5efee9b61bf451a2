"""``torch-nki conformance``: a directory of NKI sources runs on the frontend and every kernel
gets the stages it reached, whether its driver's comparisons passed, and its first error. The
corpus here is written by the tests (CI has none); ``TORCH_NKI_CORPUS`` names a real one."""

from __future__ import annotations

import json
import os
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
import torch

from torch_nki import cli, conformance
from torch_nki.conformance import KernelRow, Report

KERNELS = """\
import nki
import nki.isa as nisa
import nki.language as nl


@nki.jit
def add(a, b):
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    nl.store(out, value=nl.add(nl.load(a), nl.load(b)))
    return out


@nki.jit
def double(x):
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    t = nl.load(x)
    nisa.tensor_scalar(dst=t, data=t, op0=nl.multiply, operand0=2.0)
    nl.store(out, value=t)
    return out


@nki.jit
def unused(x):
    return x
"""

NUMPY_DRIVER = """\
import numpy as np

from kernels import add

if __name__ == "__main__":
    a = np.ones((4, 8), np.float32)
    b = np.full((4, 8), 2.0, np.float32)
    print(np.arange(100))
    np.testing.assert_allclose(add(a, b), a + b)
"""

WRONG_REFERENCE = """\
import numpy as np

from kernels import double

if __name__ == "__main__":
    x = np.ones((4, 8), np.float32)
    if np.allclose(double(x), x * 3):
        print("match")
    else:
        print("differ")
"""

TOO_WIDE = """\
import numpy as np
import nki
import nki.language as nl


@nki.jit
def too_wide(x):
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    t = nl.load(x)
    nl.store(out, value=t)
    return out


if __name__ == "__main__":
    x = np.ones((200, 4), np.float32)
    assert np.array_equal(too_wide(x), x)
"""

MISSING = """\
import nki
import not_a_module_conformance_needs

@nki.jit
def never_loaded(x):
    return x
"""

TORCH_DRIVER = """\
import torch
import torch_xla
from torch_xla.core import xla_model as xm

from kernels import add, double

if __name__ == "__main__":
    device = torch_xla.device()
    a = torch.rand((4, 8), dtype=torch.float32, device=device)
    b = torch.rand((4, 8), dtype=torch.float32, device=xm.xla_device())
    c = add(a, b)
    xm.mark_step()
    torch_xla.sync()
    assert c.device == torch.device("cpu")
    torch.testing.assert_close(c, a + b)
    d = double(a)
    assert torch.allclose(d, a * 2) and torch.equal(d, a + a)
"""

NO_REFERENCE = """\
import numpy as np

from kernels import add

if __name__ == "__main__":
    print(add(np.ones((2, 2), np.float32), np.ones((2, 2), np.float32)))
"""

ASSERTS_AFTER = """\
import numpy as np

from kernels import add

if __name__ == "__main__":
    out = add(np.ones((2, 2), np.float32), np.ones((2, 2), np.float32))
    assert out.sum() == 5, "wrong sum"
"""


def _write(folder: Path, files: dict[str, str]) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    for name, text in files.items():
        (folder / name).write_text(textwrap.dedent(text), encoding="utf-8")


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder whose drivers import a sibling kernel file, one of standalone files, and one
    with another ``kernels`` module."""
    tmp_path = tmp_path_factory.mktemp("corpus")
    _write(
        tmp_path / "shared",
        {
            "kernels.py": KERNELS,
            "add_numpy.py": NUMPY_DRIVER,
            "wrong_reference.py": WRONG_REFERENCE,
            "no_reference.py": NO_REFERENCE,
            "asserts_after.py": ASSERTS_AFTER,
            "torch_driver.py": TORCH_DRIVER,
        },
    )
    _write(tmp_path / "alone", {"too_wide.py": TOO_WIDE, "missing.py": MISSING})
    # Another folder's `kernels` module must not be the one above (folders do not leak).
    _write(
        tmp_path / "z_other",
        {"kernels.py": "VALUE = 1\n", "user.py": "from kernels import VALUE\nassert VALUE == 1\n"},
    )
    return tmp_path


@pytest.fixture(scope="module")
def report(corpus: Path) -> Report:
    return conformance.run(corpus)


def _row(report: Report, file: str, kernel: str) -> KernelRow:
    found = [r for r in report.rows if r.file == file and r.kernel == kernel]
    assert len(found) == 1, (file, kernel, report.table())
    return found[0]


def _stages(row: KernelRow) -> tuple[str, str, str, str, str]:
    return (row.loads, row.traces, row.validates, row.simulates, row.matches)


def test_numpy_driver_of_a_sibling_kernel_matches(report: Report) -> None:
    row = _row(report, "shared/add_numpy.py", "add")
    assert _stages(row) == ("yes", "yes", "yes", "yes", "yes")
    assert row.defined_in == "shared/kernels.py" and row.calls == 1 and row.comparisons == 1
    assert row.error == ""


def test_a_failed_comparison_is_not_a_match(report: Report) -> None:
    row = _row(report, "shared/wrong_reference.py", "double")
    assert _stages(row) == ("yes", "yes", "yes", "yes", "no")
    assert row.error == "numpy.allclose returned False"


def test_a_driver_without_comparison_has_no_reference(report: Report) -> None:
    assert _row(report, "shared/no_reference.py", "add").matches == "no reference"


def test_a_driver_raising_after_the_kernel_is_not_a_match(report: Report) -> None:
    row = _row(report, "shared/asserts_after.py", "add")
    assert row.simulates == "yes" and row.matches == "no"
    assert row.error == "AssertionError at asserts_after.py:7: wrong sum"


def test_torch_driver_runs_on_the_cpu_stand_in_for_torch_xla(report: Report) -> None:
    if "torch_xla" in sys.modules or _importable("torch_xla"):
        pytest.skip("torch_xla is installed: the CPU stand-in is not used")
    for kernel in ("add", "double"):
        row = _row(report, "shared/torch_driver.py", kernel)
        assert _stages(row) == ("yes", "yes", "yes", "yes", "yes"), row
    run = next(f for f in report.files if f.file == "shared/torch_driver.py")
    assert run.torch_xla_shim and run.completed
    # assert_close follows add; allclose and equal follow double.
    assert _row(report, "shared/torch_driver.py", "add").comparisons == 1
    assert _row(report, "shared/torch_driver.py", "double").comparisons == 2
    assert "torch_xla" not in sys.modules


def _importable(name: str) -> bool:
    import importlib.util

    return importlib.util.find_spec(name) is not None


def test_a_validation_failure_names_the_kernel_line(report: Report) -> None:
    row = _row(report, "alone/too_wide.py", "too_wide")
    assert _stages(row) == ("yes", "yes", "no", "-", "-")
    assert row.error.startswith("ValidationError at too_wide.py:9: [partition-dim]"), row.error
    assert "200 partitions" in row.error


def test_a_missing_module_is_the_reason(report: Report) -> None:
    row = _row(report, "alone/missing.py", "never_loaded")
    assert row.loads == "no" and row.error == "needs not_a_module_conformance_needs (not installed)"
    assert report.missing_modules() == {"not_a_module_conformance_needs": 1}
    assert "1 of 10 files need missing modules (not_a_module_conformance_needs 1)" in report.summary()


def test_a_kernel_no_driver_calls(report: Report) -> None:
    row = _row(report, "shared/kernels.py", "unused")
    assert row.loads == "yes" and row.matches == "not called by a driver"
    # Kernels a driver called get no such row.
    assert not [r for r in report.rows if r.matches == "not called by a driver" and r.kernel != "unused"]


def test_summary_counts_kernels_not_rows(report: Report) -> None:
    verdicts = report.kernels()
    # add matched in two drivers but failed in asserts_after; double failed in wrong_reference.
    assert verdicts[("shared/kernels.py", "add")] == "no"
    assert verdicts[("shared/kernels.py", "double")] == "no"
    assert verdicts[("alone/too_wide.py", "too_wide")] == "no"
    assert report.summary().startswith("0 of 5 kernels match (3 trace, 2 validate, 2 simulate; 1 not called)")


def test_runs_leave_the_process_as_they_found_it(corpus: Path) -> None:
    path, cwd, argv = list(sys.path), os.getcwd(), list(sys.argv)
    allclose, assert_close = np.allclose, torch.testing.assert_close
    modules = set(sys.modules)
    report = conformance.run(corpus)
    assert (list(sys.path), os.getcwd(), list(sys.argv)) == (path, cwd, argv)
    assert np.allclose is allclose and torch.testing.assert_close is assert_close
    assert not {"kernels", "add_numpy", "nki", "nki.language", "torch_xla"} & (set(sys.modules) - modules)
    other = next(f for f in report.files if f.file == "z_other/user.py")
    assert other.completed, other.error


def test_driver_output_is_captured(report: Report, capsys: pytest.CaptureFixture[str]) -> None:
    run = next(f for f in report.files if f.file == "shared/add_numpy.py")
    assert run.role == "driver" and "[ 0  1  2" in run.output
    assert "[ 0  1  2" not in capsys.readouterr().out


def test_table_markdown_and_json(report: Report) -> None:
    table = report.table().splitlines()
    assert table[0].split() == [
        "file",
        "kernel",
        "loads",
        "traces",
        "validates",
        "simulates",
        "matches",
        "first",
        "error",
    ]
    assert any(
        line.split()[:7] == ["shared/add_numpy.py", "add", "yes", "yes", "yes", "yes", "yes"]
        for line in table
    )
    markdown = report.markdown().splitlines()
    assert markdown[0] == "| file | kernel | loads | traces | validates | simulates | matches | first error |"
    assert "| `shared/add_numpy.py` | `add` | yes | yes | yes | yes | yes |  |" in markdown
    data = report.to_json()
    assert data["summary"] == report.summary()
    assert {r["file"] for r in data["kernels"]} >= {"shared/add_numpy.py", "alone/too_wide.py"}
    assert json.loads(json.dumps(data)) == data


def test_target_reaches_unpinned_kernels(tmp_path: Path) -> None:
    _write(
        tmp_path,
        {
            "targets.py": """\
            import numpy as np
            import nki
            import nki.isa as nisa
            import nki.language as nl

            SEEN = []

            @nki.jit
            def unpinned(x):
                SEEN.append(nisa.get_nc_version())
                out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
                nl.store(out, value=nl.load(x))
                return out

            if __name__ == "__main__":
                unpinned(np.ones((2, 2), np.float32))
                print("versions", SEEN)
            """
        },
    )
    trn1 = conformance.run(tmp_path, target="trn1").files[0].output
    trn2 = conformance.run(tmp_path).files[0].output
    assert "versions" in trn1 and trn1 != trn2, (trn1, trn2)


def test_files_inside_a_package_import_relatively(tmp_path: Path) -> None:
    """A library laid out as a package (``pkg/__init__.py``, ``pkg/ops/kernel.py`` importing
    ``..common``) loads with its relative imports, and its driver runs as ``pkg.ops.main``."""
    _write(tmp_path / "pkg", {"__init__.py": "", "common.py": "SCALE = 2.0\n"})
    _write(
        tmp_path / "pkg" / "ops",
        {
            "__init__.py": "",
            "kernel.py": """\
            import nki
            import nki.language as nl

            from ..common import SCALE

            @nki.jit(debug_kernel=True, experimental_flags="skip-checks")
            def scaled(x):
                out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
                nl.store(out, value=nl.multiply(nl.load(x), SCALE))
                return out
            """,
            "main.py": """\
            import numpy as np

            from .kernel import scaled

            if __name__ == "__main__":
                x = np.ones((2, 4), np.float32)
                np.testing.assert_allclose(scaled(x), x * 2)
            """,
        },
    )
    report = conformance.run(tmp_path)
    assert _stages(_row(report, "pkg/ops/main.py", "scaled")) == ("yes",) * 5, report.table()


def test_timeout_runs_each_file_in_a_child(tmp_path: Path) -> None:
    _write(
        tmp_path, {"kernels.py": KERNELS, "add_numpy.py": NUMPY_DRIVER, "wrong_reference.py": WRONG_REFERENCE}
    )
    report = conformance.run(tmp_path, timeout=120)
    row = _row(report, "add_numpy.py", "add")
    assert _stages(row) == ("yes", "yes", "yes", "yes", "yes")
    assert _row(report, "wrong_reference.py", "double").matches == "no"
    _write(tmp_path / "spin", {"spin.py": "while True:\n    pass\n"})
    spin = conformance.run(tmp_path / "spin", timeout=2)
    assert [(r.file, r.kernel, r.error) for r in spin.rows] == [("spin.py", "-", "timed out after 2 s")]


def test_cli_prints_the_table_and_writes_json(
    corpus: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out_json = tmp_path / "records.json"
    assert cli.main(["conformance", str(corpus / "alone"), "--markdown", "--json", str(out_json)]) == 0
    out = capsys.readouterr().out
    assert "| `too_wide.py` | `too_wide` | yes | yes | no | - | - | ValidationError at too_wide.py:9" in out
    assert "0 of 2 kernels match" in out
    assert json.loads(out_json.read_text())["kernels"][0]["file"] in ("missing.py", "too_wide.py")
    assert cli.main(["conformance", str(corpus / "shared"), "--verbose"]) == 0
    assert "--- add_numpy.py (driver," in capsys.readouterr().out


def test_real_corpus() -> None:
    corpus = os.environ.get("TORCH_NKI_CORPUS")
    if not corpus or not Path(corpus).is_dir():
        pytest.skip("set TORCH_NKI_CORPUS to a directory of NKI sources (e.g. aws-neuron-sdk's nki/examples)")
    report = conformance.run(corpus)
    assert report.rows, f"no kernels found under {corpus}"
    allowed = {"yes", "no", "-"}
    for row in report.rows:
        assert {row.loads, row.traces, row.validates, row.simulates} <= allowed, row
        assert row.matches in allowed | {"no reference", "not called by a driver"}, row
        assert row.matches != "yes" or (row.simulates == "yes" and row.comparisons > 0), row
        assert (
            row.matches == "yes" or row.error or row.matches in ("no reference", "not called by a driver")
        ), row
    print(report.table() + report.summary())

"""The interface nki-library's test framework drives (``nki_cpu_simulator``, the ``nki`` alias,
the stand-ins) and the ``torch-nki nkilib-suite`` runner, tested on a miniature checkout of
our own: CI has no nki-library (docs/nki-library.md measures the real suite)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
import torch

from torch_nki import cli, nkilib_suite
from torch_nki.nkilib_suite import _neuron_dtypes as dt
from torch_nki.nkilib_suite._interface import cpu_simulate

pytest.importorskip("ml_dtypes")

# What nki-library's framework does in simulation mode: import the simulator's modules, alias
# them as `nki`, run a kernel with cpu_simulate(kernel)[lnc](**inputs).
_DRIVER = """
import builtins, sys
import numpy as np
import nki_cpu_simulator.nki.builtin as sim_builtin
import nki_cpu_simulator.nki.compiler as sim_ncc
import nki_cpu_simulator.nki.isa as sim_nisa
import nki_cpu_simulator.nki.isa.constants as sim_nisa_constants
import nki_cpu_simulator.nki.language as sim_nl
import nki_cpu_simulator.nki.language.dtypes as sim_dtypes
import nki_cpu_simulator.nki.tensor as sim_ntensor
import nki_cpu_simulator.nki.typing as sim_nt
from nki_cpu_simulator import nki as sim_nki

builtins.builtin = sim_builtin
sys.modules.update({"nki": sim_nki, "nki.language": sim_nl, "nki.isa": sim_nisa,
    "nki.isa.constants": sim_nisa_constants, "nki.typing": sim_nt, "nki.compiler": sim_ncc,
    "nki.dtype": sim_dtypes, "nki.tensor": sim_ntensor})

import nki
import nki.language as nl
import nki.dtype as nt
from nki.isa.constants import oob_mode
from nki.collectives import ReplicaGroup
import neuron_dtypes as dt
from neuronxcc.starfish.support.dtype import static_cast

@nki.jit
def scale(x, out, factor: float):
    nl.store(out, value=nl.multiply(nl.load(x), factor))
    return out

x = static_cast(np.arange(8, dtype=np.float32).reshape(2, 4), nl.bfloat16)
out = np.zeros((2, 4), dtype=nl.bfloat16)
result = nki.cpu_simulate(scale)[1](x=x, out=out, factor=2.0)
assert result.dtype == dt.bfloat16 and (result == 2 * x).all(), result
assert sim_dtypes.bfloat16 is nl.bfloat16 and oob_mode is sim_nisa.oob_mode
assert nt.float8_e4m3 is nl.float8_e4m3 and str(nt.float8_e4m3) == "float8_e4m3"

# A trace-only test: the compiler frontend traces and validates, and kernel asserts hold.
from nki.compiler.frontend import ParserFrontend
traced = ParserFrontend().compile(scale, inputs=dict(x=x, out=out, factor=2.0), target="trn2", lnc=2)
assert traced.program.grid == [2] and traced.module is None
try:
    ParserFrontend().compile(scale, inputs=dict(x=x, out=x[:1], factor=2.0), target="trn2", lnc=1)
except Exception as e:
    assert "scale" in str(e), e
else:
    raise AssertionError("a kernel that does not trace compiled")
print("driver ok", ReplicaGroup([[0, 1]]).groups)
"""


def _shim_env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(nkilib_suite.SHIMS), env.get("PYTHONPATH", "")])
    return env


def test_the_simulator_packages_modules_run_a_kernel_as_nki_librarys_framework_does() -> None:
    run = subprocess.run(
        [sys.executable, "-c", _DRIVER], env=_shim_env(), capture_output=True, text=True, check=False
    )
    assert run.returncode == 0, run.stderr
    assert "driver ok [[0, 1]]" in run.stdout


def test_cpu_simulate_takes_an_lnc_degree_of_one_or_two() -> None:
    def kernel(x):  # a plain function is wrapped, as nki.simulate does
        return x

    with pytest.raises(ValueError, match=r"cpu_simulate\(kernel\)\[3\]: the LNC degree is 1 or 2"):
        cpu_simulate(kernel)[3]
    assert repr(cpu_simulate(kernel)[1]) == "cpu_simulate(kernel)[1]"


def test_static_cast_rounds_to_nearest_even_like_torch() -> None:
    values = np.random.default_rng(0).normal(size=1000).astype(np.float32)
    ours = dt.static_cast(values, dt.bfloat16).astype(np.float32)
    theirs = torch.from_numpy(values).to(torch.bfloat16).float().numpy()
    np.testing.assert_array_equal(ours, theirs)
    assert dt.sizeinbytes(dt.float8_e4m3fn) == 1 and dt.sizeinbytes(dt.float8_e4m3fn_x4) == 4
    assert dt.is_float_type(dt.bfloat16) and not dt.is_float_type(np.int32)
    assert float(dt.finfo(dt.float8_e4m3fn).max) == 448.0


def test_causes_group_failures_that_differ_only_in_numbers_and_paths() -> None:
    one = "E   AssertionError: 3 of 128 elements differ (/tmp/a/k.py:12)\nmore"
    two = "Traceback\nE   AssertionError: 17 of 4096 elements differ (/tmp/b/k.py:99)"
    assert nkilib_suite.cause(one) == nkilib_suite.cause(two) == "AssertionError: N of N elements differ (…)"


def test_a_memory_error_anywhere_is_the_cause() -> None:
    # A negative test whose inputs could not be allocated: the harness's AssertionError (the
    # kernel's own check never ran) is not torch-nki's failure.
    text = (
        "E   numpy._core._exceptions._ArrayMemoryError: Unable to allocate 3.58 GiB for an array\n"
        "    assert_kernel_validation_exception(expected_validation_error, e)\n"
        "E   AssertionError"
    )
    cause = nkilib_suite.cause(text)
    assert cause.startswith("numpy._core._exceptions._ArrayMemoryError: Unable to allocate")
    assert nkilib_suite.kind(cause) == "memory limit"


_CONFTEST = """
def pytest_addoption(parser):
    parser.addoption("--test-mode")
    parser.addoption("--platform-target")
    parser.addoption("--output-directory")
    parser.addoption("--force-local-cleanup", action="store_true")
"""

_TESTS = """
import numpy as np
import pytest
import nki_cpu_simulator.nki as nki
import nki_cpu_simulator.nki.language as nl

@nki.jit
def double(x):
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    nl.store(out, value=nl.multiply(nl.load(x), 2.0))
    return out

@pytest.mark.parametrize("rows", [1, 2, 4])
def test_double(rows):
    x = np.ones((rows, 8), np.float32)
    np.testing.assert_array_equal(nki.cpu_simulate(double)[1](x=x), 2 * x)

def test_unimplemented_collective():
    nki.collectives.all_reduce([], [], None, nl.add)

def test_skipped():
    pytest.skip("a slow shape")

def test_beyond_the_memory_limit():
    np.empty(2**30, np.float64)  # 8 GiB of address space, never touched
"""


def _checkout(root: Path) -> Path:
    (root / "test" / "integration").mkdir(parents=True)
    (root / "src").mkdir()
    (root / "test" / "conftest.py").write_text(_CONFTEST)
    (root / "test" / "integration" / "test_kernels.py").write_text(textwrap.dedent(_TESTS))
    (root / "test" / "integration" / "test_broken.py").write_text("import no_such_module\n")
    return root


def test_the_runner_reports_passes_skips_and_failures_by_cause(tmp_path: Path) -> None:
    log = tmp_path / "pytest.log"
    report = nkilib_suite.run(_checkout(tmp_path / "lib"), log=log, memory_gib=6)
    assert len(report.passed) == 3, log.read_text()
    assert report.skipped == 1
    assert list(report.failed.values()) == [
        "NotImplementedError: torch_nki.nki does not implement nki.collectives.all_reduce: collectives "
        "between devices are not simulated yet (…); see docs/nki-frontend.md for what is supported",
        "numpy._core._exceptions._ArrayMemoryError: Unable to allocate N GiB for an array with shape (N,) "
        "and data type float64",
    ]
    # A file that does not collect is counted, and does not stop the run.
    assert report.collected_errors == [
        "test.integration.test_broken: ModuleNotFoundError: No module named 'no_such_module'"
    ]
    text = report.markdown()
    assert text.startswith(
        "3 of 5 tests that ran passed (60.0%); 1 skipped by the suite; 1 test files did not collect.\n\n"
        "Failures: 1 on torch-nki's side, 0 from defects of nki-library's published tree (they fail on "
        "any simulator), 1 over the run's memory limit."
    )
    assert "| 1 | torch-nki | NotImplementedError" in text
    assert "| 1 | memory limit | numpy._core._exceptions._ArrayMemoryError" in text
    assert "| (file) | torch-nki | test.integration.test_broken: ModuleNotFoundError" in text


def test_known_defects_of_nki_library_are_told_apart() -> None:
    from torch_nki.nkilib_suite import _kinds

    assert _kinds.kind("KeyError: 'mask_out_hbm'") == _kinds.UPSTREAM
    assert _kinds.kind("MemoryError: (N, N, N)") == _kinds.MEMORY
    assert _kinds.kind("NotImplementedError: torch_nki.nki does not implement x") == _kinds.TORCH_NKI


def test_the_runner_can_sample_every_nth_test(tmp_path: Path) -> None:
    report = nkilib_suite.run(_checkout(tmp_path / "lib"), every=2)
    # Of the five tests in collection order, the 1st, 3rd and 5th.
    assert len(report.passed) == 2 and report.skipped == 1 and not report.failed


def test_the_command_refuses_a_path_that_is_not_a_checkout(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert cli.main(["nkilib-suite", str(tmp_path)]) == 2
    assert "is not an nki-library checkout (no test/conftest.py)" in capsys.readouterr().out


def test_cpu_simulate_launches_on_two_cores_by_program_id() -> None:
    import torch_nki.nki.language as nl
    from torch_nki import nki

    @nki.jit
    def shard(x):
        out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
        rows = x.shape[0] // nl.num_programs(0)
        part = x[nl.program_id(0) * rows : (nl.program_id(0) + 1) * rows, :]
        nl.store(out[nl.program_id(0) * rows : (nl.program_id(0) + 1) * rows, :], value=nl.exp(nl.load(part)))
        return out

    x = np.linspace(-1, 1, 64, dtype=np.float32).reshape(8, 8)
    np.testing.assert_allclose(cpu_simulate(shard)[2](x=x), np.exp(x), rtol=1e-6)


def test_the_command_runs_every_test_id_given() -> None:
    ids = ["test/a.py::TestA::test_x[1-2]", "test/b"]
    args = nkilib_suite.command(Path("checkout"), Path("junit.xml"), tests=ids)
    at = args.index("pytest") + 1
    assert args[at : at + 2] == ids
